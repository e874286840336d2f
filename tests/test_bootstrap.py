"""tools/bootstrap.sh, the README and the scripts agree on the dependencies and on
which Python runs (issue 31: a stock Debian 12, whose python3 takes no pip packages).

- The README's "Two commands" lists name exactly the packages of the bootstrap's
  run and test sets, Debian and PyPI alike.
- Nothing installs into, or runs project Python code with, whatever python3 is on
  PATH: the Makefile and the shell scripts go through the project's .venv (or
  $PYTHON, which the Makefile sets to it), Python code that starts Python uses
  sys.executable, and CMake defaults to .venv/bin/python.
- This very test runs under the project's .venv (ctest passes CMake's Python3,
  which the Makefile sets to it), unless a developer configured another on purpose.
"""
import glob
import os
import re
import sys

SRC = os.environ.get("BEACON_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(rel):
    with open(os.path.join(SRC, rel)) as f:
        return f.read()


def bash_array(text, name):
    m = re.search(rf"^{name}=\((.*?)\)", text, re.M | re.S)
    assert m, f"tools/bootstrap.sh: no array {name}"
    body = "\n".join(line.split("#", 1)[0] for line in m.group(1).splitlines())
    return body.split()


def readme_packages(readme, heading_marker, kind):
    """Backquoted package names of the README bullet `kind` ("Debian" or "PyPI") under the
    bullet that starts with heading_marker."""
    start = readme.index(heading_marker)
    end = readme.find("\n- `make", start + len(heading_marker))
    block = readme[start:end if end > 0 else None]
    m = re.search(rf"^  - {kind}[^:]*:(.*?)(?=^  - |\Z)", block, re.M | re.S)
    assert m, f"README: no {kind} list under {heading_marker!r}"
    names = []
    for quoted in re.findall(r"`([^`]+)`", m.group(1)):
        names += [w for w in quoted.split() if re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", w)]
    return names


def test_readme_lists_match_the_bootstrap():
    boot, readme = read("tools/bootstrap.sh"), read("README.md")
    apt_run, apt_test = bash_array(boot, "APT_RUN"), bash_array(boot, "APT_TEST")
    pip_run = [e.split(":")[0] for e in bash_array(boot, "PIP_RUN")]
    pip_test = [e.split(":")[0] for e in bash_array(boot, "PIP_TEST")]
    kubectl = re.search(r"^KUBECTL_PIP=([a-z0-9-]+)", boot, re.M).group(1)
    run_marker, test_marker = "- `make run` installs", "- `make test` adds"
    assert sorted(readme_packages(readme, run_marker, "Debian")) == sorted(apt_run)
    assert sorted(readme_packages(readme, run_marker, "PyPI")) == sorted(pip_run)
    assert sorted(readme_packages(readme, test_marker, "Debian")) == sorted(apt_test)
    assert sorted(readme_packages(readme, test_marker, "PyPI")) == sorted(pip_test + [kubectl])
    # The run set is what a server needs; test-only servers and toolchains stay out of it.
    for p in ("prometheus", "haproxy", "clang", "clang-format", "clang-tidy", "libclang-rt-14-dev"):
        assert p not in apt_run and p in apt_test, p
    assert "python3-venv" in apt_run, "Debian's python3 -m venv needs python3-venv"
    print(f"  README lists {len(apt_run)}+{len(apt_test)} Debian and {len(pip_run)}+{len(pip_test) + 1} PyPI "
          "packages, as the bootstrap installs them")


# `pip install`, `pip3 download`, `python3 -m pip install`: the interpreter on PATH, not "$PY" (.venv's).
# Matched on the line with its quoted strings removed, so `"$PY" -m pip` and messages pass.
SYSTEM_PIP = re.compile(r"(^|[\s;&|(])((?<!-m )(pip3?)|(python3?\s+-m\s+pip))\s+(install|download)\b")


def test_no_system_python():
    offenders = []
    scripts = ["Makefile", ".ci/run"] + sorted(os.path.relpath(p, SRC) for p in
                                                glob.glob(os.path.join(SRC, "tools", "*.sh")) +
                                                glob.glob(os.path.join(SRC, "deploy", "docker", "*.sh")))
    for rel in scripts:
        for n, line in enumerate(read(rel).splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
            if SYSTEM_PIP.search(re.sub(r'"[^"]*"', '""', code)):
                offenders.append(f"{rel}:{n}: pip on the system python: {line.strip()}")
            # A project script run by the system python3 lacks the .venv's packages.
            if re.search(r"(^|[\s;&|(])python3\s+(tools|tests)/", code):
                offenders.append(f"{rel}:{n}: python3 runs a project script: {line.strip()}")
    py_files = glob.glob(os.path.join(SRC, "tools", "*.py")) + glob.glob(os.path.join(SRC, "tests", "**", "*.py"),
                                                                           recursive=True)
    for path in py_files:
        if "/fixtures/" in path:
            continue
        for n, line in enumerate(open(path), 1):
            code = line.split("#", 1)[0]
            if re.search(r"""\[\s*["'](python3?|pip3?)["']\s*,""", code):
                offenders.append(f"{os.path.relpath(path, SRC)}:{n}: starts python by name, not sys.executable")
    assert not offenders, "\n".join(offenders)
    cmake = read("CMakeLists.txt")
    assert re.search(r"set\(Python3_EXECUTABLE \$\{beacon_venv\}/bin/python CACHE", cmake)
    print(f"  {len(scripts)} scripts and {len(py_files)} Python files use the project's Python")


def test_runs_under_the_venv():
    venv = os.environ.get("BEACON_VENV") or os.path.join(SRC, ".venv")
    if not os.path.isdir(venv):
        print(f"  skip: {venv} does not exist (configured with another Python on purpose)")
        return
    assert os.path.realpath(sys.prefix) == os.path.realpath(venv), \
        f"the tests run under {sys.prefix}, not the project's {venv}: configure with the Makefile or -DPython3_EXECUTABLE"
    print(f"  python {sys.version.split()[0]} from {sys.prefix}")


if __name__ == "__main__":
    for t in (test_readme_lists_match_the_bootstrap, test_no_system_python, test_runs_under_the_venv):
        t()
        print(f"ok {t.__name__}")
