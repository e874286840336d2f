"""deploy/docker: the container images' Dockerfiles, checked by their text
in CI. The images themselves are built and run by tools/image-check.sh
(podman; tens of minutes, so not in CI: docs/deploy.md has its last run).

- Both are multi-stage: a build stage that installs with `tools/bootstrap.sh
  run` (Debian packages and the project's .venv) and builds with `make
  build`, the very steps CI runs (.ci/run -> make test -> make build -> make
  deps-run), so the image cannot drift from what CI builds; a Debian 12 slim
  runtime stage with only the binaries (and, for CUDA, cuBLAS).
- The build's CMake flags are options CMakeLists.txt declares, and the
  Makefile's configure rule accepts them (run here, into a temporary
  directory: configuring takes a second).
- The runtime stage installs the packages deploy/docker/runtime-packages.sh
  lists; run on the binaries built here, it finds a Debian package for every
  library they load.
- Non-root (numeric user, the one the Kubernetes manifests run as), the model
  on a volume (never copied in), the ports and BEACON_* defaults are
  beacon-serve's, SIGTERM stops it (the drain), the build context leaves out
  build trees and models (.dockerignore).
"""
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time

import yaml

SRC = os.environ["BEACON_SOURCE_DIR"]
BIN = os.environ.get("BEACON_BIN", "")
DOCKER = os.path.join(SRC, "deploy", "docker")
DOCKERFILES = ["Dockerfile", "Dockerfile.cuda"]


def parse(path):
    """[(stage index, INSTRUCTION, argument text)], continuation lines joined."""
    out, stage, cur = [], -1, ""
    for raw in open(path):
        line = raw.rstrip("\n")
        if not cur and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.lstrip().startswith("#"):  # a comment inside a continued instruction
            continue
        cur += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        instr, _, arg = cur.strip().partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            stage += 1
        out.append((stage, instr, arg.strip()))
        cur = ""
    return out


def stages(instrs):
    n = max(s for s, _, _ in instrs) + 1
    return [[(i, a) for s, i, a in instrs if s == k] for k in range(n)]


def exec_form(arg):
    import json
    return json.loads(arg) if arg.startswith("[") else shlex.split(arg)


def env_of(stage):
    env = {}
    for instr, arg in stage:
        if instr == "ENV":
            for token in shlex.split(arg):
                if "=" in token:
                    k, v = token.split("=", 1)
                    env[k] = v
    return env


def help_flags():
    out = subprocess.run([os.path.join(BIN, "beacon-serve"), "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    return set(re.findall(r"^\s+--([a-z0-9-]+)", out, re.M))


def cmake_flags(run_arg):
    m = re.search(r'CMAKE_FLAGS="([^"]*)"', run_arg)
    assert m, run_arg
    return m.group(1).split()


def k8s_run_as_user():
    d = yaml.safe_load(open(os.path.join(SRC, "deploy", "k8s", "base", "deployment.yaml")))
    return d["spec"]["template"]["spec"]["securityContext"]["runAsUser"]


def test_dockerfiles_build_like_ci():
    makefile = open(os.path.join(SRC, "Makefile")).read()
    assert re.search(r"^build: deps-run ", makefile, re.M) and re.search(
        r"^deps-run:\n\t@tools/bootstrap.sh run$", makefile, re.M), "make build no longer runs bootstrap.sh run"
    assert re.search(r"^deps:\n\t@tools/bootstrap.sh test$", makefile, re.M)
    ci = open(os.path.join(SRC, ".ci", "run")).read()
    assert "make test" in ci and re.search(r"^test: deps build ", makefile, re.M)
    cmakelists = open(os.path.join(SRC, "CMakeLists.txt")).read()
    declared = set(re.findall(r"option\((\w+)", cmakelists)) | set(re.findall(r"set\((\w+) .*CACHE", cmakelists))
    for name in DOCKERFILES:
        path = os.path.join(DOCKER, name)
        st = stages(parse(path))
        assert len(st) >= 2, f"{name}: not multi-stage"
        build, runtime = st[0], st[-1]
        assert build[0][0] == "FROM" and re.match(r"debian:bookworm-slim AS build$", build[0][1]), build[0]
        assert runtime[0] == ("FROM", "debian:bookworm-slim"), runtime[0]
        runs = [a for i, a in build if i == "RUN"]
        copies = [a for i, a in build if i == "COPY"]
        # The install script CI runs, copied in first (a layer cached until it changes) ...
        assert any(a.split() == ["tools/bootstrap.sh", "tools/bootstrap.sh"] for a in copies), copies
        # The run set: the build needs the Debian libraries and .venv's googleapis-common-protos,
        # not the test servers, sanitizers and oracles.
        assert any(re.search(r"(^|&& |\s)tools/bootstrap\.sh run(\s|$)", a) for a in runs), runs
        # ... and the build CI runs.
        make = [a for a in runs if re.search(r"\bmake build\b", a)]
        assert len(make) == 1, runs
        assert "cmake " not in make[0], "build with make build, not a cmake line of its own"
        flags = cmake_flags(make[0])
        for f in flags:
            m = re.match(r"-D(\w+)=(.*)", f)
            assert m, f
            assert m.group(1) in declared or m.group(1).startswith("CMAKE_"), f"{name}: {f} is not a CMake option"
        assert "-DBEACON_BUILD_TESTS=OFF" in flags
        arch = next(f for f in flags if f.startswith("-DBEACON_CPU_ARCH="))
        assert arch != "-DBEACON_CPU_ARCH=native", "an image must not be built for the build machine's CPU"
        assert any("deploy/docker/runtime-packages.sh" in a for a in runs)
        assert "BEACON_SKIP_PIP" not in env_of(build), "the build reads a PyPI package from .venv"
        for a in copies:
            if not a.startswith("--from"):
                for src in shlex.split(a)[:-1]:
                    assert src == "." or os.path.exists(os.path.join(SRC, src)), f"{name}: COPY {src}: no such path"
        if name == "Dockerfile.cuda":
            assert "-DBEACON_WITH_CUDA=ON" in flags
            assert any("deploy/docker/cuda-from-pypi.sh" in a for a in runs), "nvcc and cuBLAS from PyPI"
            assert any("*.cu.o" in a for a in runs), "the CUDA image must fail to build without its kernels"
        else:
            assert "-DBEACON_WITH_CUDA=OFF" in flags
        print(f"  {name}: {len(st)} stages; bootstrap.sh + make build {' '.join(flags)}")


def test_makefile_configures_with_the_image_flags():
    """The Makefile's configure rule, run with each image's CMAKE_FLAGS."""
    for name in DOCKERFILES:
        st = stages(parse(os.path.join(DOCKER, name)))
        make = next(a for i, a in st[0] if i == "RUN" and "make build" in a)
        flags = [f for f in cmake_flags(make) if "CUDA_COMPILER" not in f]
        if name == "Dockerfile.cuda":
            # No nvcc needed to configure: CMake then leaves the kernels out, as on any machine without it.
            flags = [f if f != "-DBEACON_WITH_CUDA=ON" else "-DBEACON_WITH_CUDA=OFF" for f in flags]
        with tempfile.TemporaryDirectory(prefix="beacon-image-configure-") as d:
            p = subprocess.run(["make", "-C", SRC, f"{d}/build-image/CMakeCache.txt", f"BUILD_DIR={d}/build-image",
                                f"CMAKE_FLAGS={' '.join(flags)}"], capture_output=True, text=True, timeout=300)
            assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
            cache = open(f"{d}/build-image/CMakeCache.txt").read()
            assert "BEACON_BUILD_TESTS:BOOL=OFF" in cache
            arch = next(f for f in flags if f.startswith("-DBEACON_CPU_ARCH=")).split("=", 1)[1]
            assert f"BEACON_CPU_ARCH:STRING={arch}" in cache
        print(f"  {name}: make configures with {' '.join(flags)}")


def test_runtime_packages():
    script = os.path.join(DOCKER, "runtime-packages.sh")
    assert os.access(script, os.X_OK)
    bins = [os.path.join(BIN, "beacon-serve"), os.path.join(BIN, "beacon-client")]
    p = subprocess.run([script, *bins], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    pkgs = p.stdout.split()
    assert pkgs == sorted(set(pkgs)) and "libc6" in pkgs, pkgs
    assert any(x.startswith("libgrpc++") for x in pkgs) and any(x.startswith("libprotobuf") for x in pkgs), pkgs
    # Runtime packages, not the -dev ones the build installs.
    assert not any(x.endswith("-dev") for x in pkgs), pkgs
    for x in pkgs:
        q = subprocess.run(["dpkg-query", "-W", "-f=${Status}", x], capture_output=True, text=True)
        assert "install ok installed" in q.stdout, x
    # Refuses what it cannot resolve.
    assert subprocess.run([script], capture_output=True).returncode != 0
    print(f"  runtime packages of beacon-serve, beacon-client: {' '.join(pkgs)}")


def test_runtime_stage():
    flags = help_flags()
    uid = k8s_run_as_user()
    for name in DOCKERFILES:
        st = stages(parse(os.path.join(DOCKER, name)))
        runtime = st[-1]
        instrs = [i for i, _ in runtime]
        get = lambda k: [a for i, a in runtime if i == k]  # noqa: E731
        # Only the binaries come from the build stage; never the model.
        copies = get("COPY")
        assert all(a.startswith("--from=build ") for a in copies), copies
        copied = [s for a in copies for s in shlex.split(a)[1:-1]]
        assert sorted(os.path.basename(s) for s in copied if "/bin/" in s) == ["beacon-client", "beacon-serve"]
        assert not any("model" in s or s.endswith(".gguf") for s in copied), copied
        # Non-root, numeric (Kubernetes' runAsNonRoot can only check a number), the manifests' user.
        user = get("USER")[-1]
        assert re.fullmatch(r"\d+(:\d+)?", user) and int(user.split(":")[0]) == uid != 0, (user, uid)
        assert instrs.index("USER") > max(k for k, i in enumerate(instrs) if i == "RUN")
        assert any(f"--uid {uid}" in a for a in get("RUN")), "the user must exist in the image"
        env = env_of(runtime)
        for k in env:
            if k.startswith("BEACON_"):
                flag = k[len("BEACON_"):].lower().replace("_", "-")
                assert flag in flags, f"{name}: {k} is no beacon-serve flag"
        assert env["BEACON_HOST"] == "0.0.0.0" and env["BEACON_MODEL"].startswith("/models/")
        assert exec_form(get("VOLUME")[-1]) == ["/models"]
        assert sorted(get("EXPOSE")[-1].split()) == sorted([env["BEACON_GRPC_PORT"], env["BEACON_HTTP_PORT"],
                                                        env["BEACON_ADMIN_PORT"]])
        assert get("STOPSIGNAL") == ["SIGTERM"]
        assert exec_form(get("ENTRYPOINT")[-1]) == ["/usr/local/bin/beacon-serve"]
        assert any("runtime-packages.txt" in a and "apt-get install" in a for a in get("RUN"))
        if name == "Dockerfile.cuda":
            assert env.get("NVIDIA_VISIBLE_DEVICES") and "compute" in env.get("NVIDIA_DRIVER_CAPABILITIES", "")
        print(f"  {name}: runtime as uid {uid}, model volume /models, ports {get('EXPOSE')[-1]}")
    # The build context leaves out build trees, models and git.
    ignore = open(os.path.join(SRC, ".dockerignore")).read().split()
    for pattern in ("build", "build-*", "models/*.gguf", ".git", ".venv"):
        assert pattern in ignore, pattern


def main():
    tests = [test_dockerfiles_build_like_ci, test_makefile_configures_with_the_image_flags]
    if BIN and os.path.exists(os.path.join(BIN, "beacon-serve")):
        tests += [test_runtime_packages, test_runtime_stage]
    else:
        print("skip test_runtime_packages, test_runtime_stage: no $BEACON_BIN/beacon-serve")
    for t in tests:
        t0 = time.time()
        t()
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
