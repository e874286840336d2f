"""deploy/k8s: every overlay (and the base with each component) renders with
`kubectl kustomize`; the rendered core objects validate strictly against the
Kubernetes JSON schemas, offline (PyPI kubernetes-validate), at the oldest
and the newest supported version; the custom resources (PodMonitor,
ScaledObject, InferencePool, HTTPRoute), whose schemas kubernetes-validate
does not have, are checked structurally: their required fields, and that
every reference among the objects resolves (selectors match the pods, named
ports exist, metric names are beacon-serve's). The endpoint picker in both
forms: components/inference-gateway (EPP v1.4+, an EndpointPickerConfig with
a metrics data source on /metrics wired to an extractor whose per-engine
metric names, `beacon` and `vllm`, are beacon-serve's in each naming) and
components/inference-gateway-flags (EPP up to v1.2, the metric names as
flags). And the manifests agree with
the server: the grace period covers preStop + drain + shutdown, every
BEACON_* setting is a beacon-serve flag, ports and probes match, and each
overlay's configuration starts the real beacon-serve."""
import os
import re
import signal
import subprocess
import sys
import time

import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway_checks import check_inference_gateway  # noqa: E402
from k8s_util import (COMPONENTS, K8S, OVERLAYS, SRC, arg_value, container, find, matches, one,  # noqa: E402
                      port_number, quantity_cores, render, render_with_components)

import kubernetes_validate  # noqa: E402
from kubernetes_validate import utils as kv_utils  # noqa: E402

# Oldest supported: grpc probes are GA from 1.27, and every API used here
# (apps/v1, policy/v1, autoscaling/v2) is older.
K8S_VERSIONS = ["1.28.0", kv_utils.latest_version()]
CRD_KINDS = {("monitoring.coreos.com/v1", "PodMonitor"), ("keda.sh/v1alpha1", "ScaledObject"),
             ("inference.networking.k8s.io/v1", "InferencePool"),
             ("gateway.networking.k8s.io/v1", "HTTPRoute")}
SIGNALS = {"beacon_num_requests_waiting", "beacon_kv_cache_usage_perc"}
SERVE_MAIN = open(os.path.join(SRC, "apps", "beacon_serve_main.cc")).read()
BIN = os.environ.get("BEACON_BIN", "")
MODEL = os.environ.get("BEACON_MODEL", "")

_rendered = {}


def rendered():
    """{name: objects}: every overlay, the base alone, the base + each component."""
    if not _rendered:
        for o in OVERLAYS:
            _rendered[f"overlays/{o}"] = render(os.path.join(K8S, "overlays", o))
        _rendered["base"] = render(os.path.join(K8S, "base"))
        for c in COMPONENTS:
            _rendered[f"base+{c}"] = render_with_components([c])
    return _rendered


def serve(objs):
    return one(objs, "Deployment", "beacon-serve")


def serve_config(objs):
    """The ConfigMap the beacon-serve container takes its environment from."""
    c = container(serve(objs), "beacon-serve")
    names = [e["configMapRef"]["name"] for e in c.get("envFrom", []) if "configMapRef" in e]
    assert len(names) == 1, names
    return one(objs, "ConfigMap", names[0])["data"]


def test_render_every_overlay():
    assert set(OVERLAYS) >= {"cpu", "gpu"}, OVERLAYS
    assert set(COMPONENTS) >= {"hpa", "keda", "inference-gateway"}, COMPONENTS
    for name, objs in rendered().items():
        kinds = {o["kind"] for o in objs}
        assert {"Deployment", "Service", "PodDisruptionBudget", "ConfigMap", "PodMonitor",
                "PersistentVolumeClaim"} <= kinds, (name, kinds)
        if name.startswith("overlays/"):
            assert all(o["metadata"].get("namespace") == "beacon" for o in objs
                       if o["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")), name
    cpu, gpu = rendered()["overlays/cpu"], rendered()["overlays/gpu"]
    assert find(cpu, "ScaledObject") and not find(cpu, "HorizontalPodAutoscaler")
    assert find(gpu, "HorizontalPodAutoscaler") and not find(gpu, "ScaledObject") and find(gpu, "InferencePool")
    print(f"  rendered: {', '.join(f'{k} ({len(v)} objects)' for k, v in rendered().items())}")


def test_core_objects_validate_strictly():
    checked, crds = set(), set()
    for name, objs in rendered().items():
        for o in objs:
            key = (o["apiVersion"], o["kind"])
            if key in CRD_KINDS:
                crds.add(key)
                continue
            for v in K8S_VERSIONS:
                try:
                    kubernetes_validate.validate(o, v, strict=True)
                except kubernetes_validate.SchemaNotFoundError:
                    raise AssertionError(f"{name}: {key} has no Kubernetes {v} schema and is not a known CRD")
                except kubernetes_validate.ValidationError as e:
                    raise AssertionError(f"{name}: {o['kind']}/{o['metadata']['name']} is invalid for "
                                         f"Kubernetes {v}: {e.message} at {list(e.path)}")
            checked.add(key)
    # The CRDs really are unknown to the schemas (or they would be validated above).
    for api, kind in crds:
        try:
            kubernetes_validate.validate({"apiVersion": api, "kind": kind, "metadata": {"name": "x"}},
                                         K8S_VERSIONS[-1], strict=True)
            raise AssertionError(f"{kind} has a schema now: validate it strictly")
        except kubernetes_validate.SchemaNotFoundError:
            pass
    print(f"  strict against Kubernetes {' and '.join(K8S_VERSIONS)}: {sorted(k for _, k in checked)}; "
          f"structural only (CRDs): {sorted(k for _, k in crds)}")


def _check_pod_monitor(objs, pm):
    spec = pm["spec"]
    d = serve(objs)
    assert matches(spec["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"]), \
        "the PodMonitor does not select the pods"
    for ep in spec["podMetricsEndpoints"]:
        # The admin port (--admin-port): client traffic cannot crowd the scrape out.
        assert ep["port"] == "admin" and ep.get("path", "/metrics") == "/metrics", ep
        port_number(container(d, "beacon-serve"), "admin")
        relabel = {r.get("targetLabel"): r.get("replacement") for r in ep.get("relabelings", [])}
        # deploy/prometheus/rules.yml's BeaconDown alert selects job="beacon".
        assert relabel.get("job") == "beacon", ep


def _check_scaled_object(objs, so, namespace):
    spec = so["spec"]
    assert spec["scaleTargetRef"]["name"] == "beacon-serve" and spec["scaleTargetRef"].get("kind", "Deployment") \
        == "Deployment"
    assert 1 <= spec["minReplicaCount"] <= spec["maxReplicaCount"]
    seen = set()
    for t in spec["triggers"]:
        assert t["type"] == "prometheus", t
        md = t["metadata"]
        assert re.match(r"^https?://[^/\s]+", md["serverAddress"]), md
        float(md["threshold"])
        names = set(re.findall(r"\b(beacon_[a-z_]+)\{", md["query"]))
        assert names and names <= SIGNALS, md["query"]
        seen |= names
        ns = re.findall(r'namespace="([^"]+)"', md["query"])
        assert ns == [namespace], (ns, namespace, md["query"])
    assert seen == SIGNALS, seen
    assert "replicas" not in serve(objs)["spec"], "the ScaledObject owns the replica count"


def _check_hpa(objs):
    hpa = one(objs, "HorizontalPodAutoscaler")
    assert hpa["spec"]["scaleTargetRef"]["name"] == "beacon-serve"
    names = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    assert names == SIGNALS, names
    assert "replicas" not in serve(objs)["spec"], "the HPA owns the replica count"
    # prometheus-adapter serves exactly these names, from beacon-serve's series.
    values = yaml.safe_load(open(os.path.join(K8S, "components", "hpa", "prometheus-adapter-values.yaml")))
    served = set()
    for rule in values["rules"]["custom"]:
        series = re.match(r"^(\w+)\{", rule["seriesQuery"]).group(1)
        assert series in SIGNALS, series
        assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}, rule
        assert re.match(rule["name"]["matches"], series)
        for token in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
            assert token in rule["metricsQuery"], (token, rule["metricsQuery"])
        served.add(rule["name"]["as"])
    assert served == names, (served, names)


def test_crd_objects_structurally():
    gateway_forms = set()
    for name, objs in rendered().items():
        namespace = "beacon" if name != "base" else None
        _check_pod_monitor(objs, one(objs, "PodMonitor"))
        if find(objs, "ScaledObject"):
            _check_scaled_object(objs, one(objs, "ScaledObject"), namespace or "beacon")
        if find(objs, "HorizontalPodAutoscaler"):
            _check_hpa(objs)
        assert not (find(objs, "ScaledObject") and find(objs, "HorizontalPodAutoscaler")), name
        if find(objs, "InferencePool"):
            gateway_forms.add(check_inference_gateway(objs, namespace or "beacon")[1])
        for o in objs:
            if (o["apiVersion"], o["kind"]) in CRD_KINDS:
                assert o["metadata"]["name"] and isinstance(o.get("spec"), dict), o
    # Both EPP forms render and validate: the EndpointPickerConfig one (components/inference-gateway) and the
    # older flag one (components/inference-gateway-flags).
    assert gateway_forms == {"config", "flags"}, gateway_forms


def server_exit_s():
    """Seconds beacon-serve may still take after its drain timeout: cancelling
    what is left, then the gRPC shutdown deadline (apps/beacon_serve_main.cc)."""
    cancel = re.search(r"cancel_end = Clock::now\(\) \+ std::chrono::seconds\((\d+)\)", SERVE_MAIN)
    shutdown = re.search(r"server->Shutdown\(std::chrono::system_clock::now\(\) \+ std::chrono::seconds\((\d+)\)\)",
                         SERVE_MAIN)
    assert cancel and shutdown, "beacon_serve_main.cc's shutdown changed: update server_exit_s()"
    return int(cancel.group(1)) + int(shutdown.group(1))


def prestop_sleep_s(c):
    pre = c["lifecycle"]["preStop"]
    if "sleep" in pre:
        return int(pre["sleep"]["seconds"])
    cmd = pre["exec"]["command"]
    assert cmd[0] in ("sleep", "/bin/sleep", "/usr/bin/sleep") and len(cmd) == 2, cmd
    return int(cmd[1])


def drain_timeout_s(c, config):
    """--drain-timeout-s as the container gets it: args win over the environment."""
    args = c.get("args", []) + c.get("command", [])
    v = arg_value(args, "--drain-timeout-s")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    v = v or env.get("BEACON_DRAIN_TIMEOUT_S") or config.get("BEACON_DRAIN_TIMEOUT_S")
    assert v is not None, "no drain timeout set: the default (30) would be implicit"
    return int(v)


def drain_delay_s(c, config):
    """--drain-delay-s as the container gets it (0 when unset, the server's default)."""
    args = c.get("args", []) + c.get("command", [])
    v = arg_value(args, "--drain-delay-s")
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    return int(v or env.get("BEACON_DRAIN_DELAY_S") or config.get("BEACON_DRAIN_DELAY_S") or 0)


def test_drain_and_grace_agree():
    extra = server_exit_s()
    for name, objs in rendered().items():
        d = serve(objs)
        pod = d["spec"]["template"]["spec"]
        c = container(d, "beacon-serve")
        grace = pod.get("terminationGracePeriodSeconds", 30)
        pre, drain = prestop_sleep_s(c), drain_timeout_s(c, serve_config(objs))
        delay = drain_delay_s(c, serve_config(objs))
        assert pre >= 1, "preStop must give the endpoints time to drop the pod"
        assert grace > pre + delay + drain + extra, (
            f"{name}: terminationGracePeriodSeconds {grace} <= preStop {pre} + drain delay {delay} + "
            f"drain timeout {drain} + shutdown {extra}")
        print(f"  {name}: grace {grace} s > preStop {pre} + drain delay {delay} + drain {drain} + shutdown {extra}")


def help_flags():
    out = subprocess.run([os.path.join(BIN, "beacon-serve"), "--help"], capture_output=True, text=True,
                         timeout=30).stdout
    return set(re.findall(r"^\s+--([a-z0-9-]+)", out, re.M))


def test_config_matches_server():
    flags = help_flags()
    assert {"kv-policy", "drain-timeout-s", "grpc-port"} <= flags, flags
    for name, objs in rendered().items():
        config = serve_config(objs)
        for key in config:
            assert key.startswith("BEACON_"), key
            flag = key[len("BEACON_"):].lower().replace("_", "-")
            assert flag in flags, f"{name}: {key} is no beacon-serve flag (--{flag})"
        d = serve(objs)
        pod = d["spec"]["template"]["spec"]
        c = container(d, "beacon-serve")
        grpc_port, http_port = port_number(c, "grpc"), port_number(c, "http")
        assert int(config["BEACON_GRPC_PORT"]) == grpc_port and int(config["BEACON_HTTP_PORT"]) == http_port
        assert config["BEACON_HOST"] == "0.0.0.0"
        # Probes on the admin port, which no Service exposes (issue 35).
        admin_port = port_number(c, "admin")
        assert int(config["BEACON_ADMIN_PORT"]) == admin_port
        assert c["readinessProbe"]["httpGet"]["path"] == "/ready"
        assert c["readinessProbe"]["httpGet"]["port"] in ("admin", admin_port)
        assert c["startupProbe"]["httpGet"]["path"] == "/health"
        assert c["startupProbe"]["httpGet"]["port"] in ("admin", admin_port)
        assert c["livenessProbe"]["httpGet"]["path"] == "/health"
        assert c["livenessProbe"]["httpGet"]["port"] in ("admin", admin_port)
        # BEACON_* service-link variables would be read as flags.
        assert pod["enableServiceLinks"] is False
        # Engine threads: the CPU request (0 = "all" would count the node's cores).
        assert int(config["BEACON_THREADS"]) == quantity_cores(c["resources"]["requests"]["cpu"]), name
        assert config["BEACON_MODEL"].startswith("/models/")
        mount = next(m for m in c["volumeMounts"] if m["mountPath"] == "/models")
        assert mount["readOnly"] is True
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        # Services and the budget select the pods.
        labels = d["spec"]["template"]["metadata"]["labels"]
        for s in find(objs, "Service"):
            if s["metadata"]["name"].startswith("beacon-serve") and "epp" not in s["metadata"]["name"]:
                assert matches(s["spec"]["selector"], labels), s["metadata"]["name"]
                for p in s["spec"]["ports"]:
                    assert p["targetPort"] in ("grpc", "http"), p
        assert matches(one(objs, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)
        assert matches(d["spec"]["selector"]["matchLabels"], labels)
        gpus = c["resources"].get("limits", {}).get("nvidia.com/gpu")
        image = c["image"]
        if name == "overlays/cpu":
            assert gpus is None and image == "beacon-serve:cpu" and "tolerations" not in pod, (gpus, image)
        elif name == "overlays/gpu":
            assert gpus == 1 and image == "beacon-serve:cuda", (gpus, image)


def _start(config_env):
    """beacon-serve with exactly `config_env` as its BEACON_* environment (the
    test's own BEACON_BIN, BEACON_MODEL ... are left out: beacon-serve would
    read BEACON_MODEL as --model)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BEACON_")}
    env.update(config_env)
    return subprocess.Popen([os.path.join(BIN, "beacon-serve")], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_ready(proc, timeout=120):
    """The READY match of beacon-serve's log, or an AssertionError with the log."""
    import select
    sys.path.insert(0, os.path.join(SRC, "tests", "server"))
    import serve_util
    out, end = "", time.time() + timeout
    while time.time() < end:
        r, _, _ = select.select([proc.stdout], [], [], 0.5)
        if r:
            line = proc.stdout.readline()
            if not line:
                break
            out += line
            m = serve_util.READY.search(line)
            if m:
                return m
    raise AssertionError(f"beacon-serve did not start with this configuration:\n{out}")


def test_config_runs_beacon_serve():
    """Each overlay's ConfigMap, as the environment of the real beacon-serve
    (the model, address, ports and threads swapped for local ones, and the
    GPU overlay's pool shrunk and its device set to this machine's CPU): it starts, reports the
    configured policy and admission, and drains on SIGTERM."""
    sys.path.insert(0, os.path.join(SRC, "tests", "server"))
    import serve_util
    for name in [f"overlays/{o}" for o in OVERLAYS]:
        config = dict(serve_config(rendered()[name]))
        if name == "overlays/gpu":
            assert config.get("BEACON_DEVICE") == "cuda", config.get("BEACON_DEVICE")
        local = {"BEACON_MODEL": MODEL, "BEACON_HOST": "127.0.0.1", "BEACON_GRPC_PORT": "0",
                 "BEACON_HTTP_PORT": "0", "BEACON_THREADS": "1", "BEACON_DEVICE": "cpu"}
        if int(config.get("BEACON_KV_POOL_TOKENS", "32768")) > 32768:
            local["BEACON_KV_POOL_TOKENS"] = "32768"
        env = {**config, **local}
        proc = _start(env)
        try:
            grpc_port = int(_wait_ready(proc).group(1))
            with serve_util.grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as ch:
                info = serve_util.pb_grpc.BeaconServiceStub(ch).GetModelInfo(serve_util.pb.GetModelInfoRequest(),
                                                                             timeout=10)
            assert info.default_kv_policy == config.get("BEACON_KV_POLICY", "beacon"), info.default_kv_policy
            assert info.admission == config.get("BEACON_ADMISSION", "reserve"), info.admission
            if "BEACON_KV_BUDGET" in config:
                assert info.default_kv_budget == int(config["BEACON_KV_BUDGET"]), info.default_kv_budget
            assert info.kv_pool_tokens == int(env["BEACON_KV_POOL_TOKENS"]), info.kv_pool_tokens
            t = time.time()
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=int(config["BEACON_DRAIN_TIMEOUT_S"]) + 10) == 0
            rest = proc.stdout.read()
            assert f"draining ({config['BEACON_DRAIN_TIMEOUT_S']} s at most)" in rest, rest
            print(f"  {name}: beacon-serve took its ConfigMap (policy {info.default_kv_policy}, admission "
                  f"{info.admission}, drain {config['BEACON_DRAIN_TIMEOUT_S']} s) and exited 0 in "
                  f"{time.time() - t:.1f}s after SIGTERM")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main():
    tests = [test_render_every_overlay, test_core_objects_validate_strictly, test_crd_objects_structurally,
             test_drain_and_grace_agree]
    if BIN and os.path.exists(os.path.join(BIN, "beacon-serve")):
        tests += [test_config_matches_server, test_config_runs_beacon_serve]
    else:
        print("skip test_config_matches_server, test_config_runs_beacon_serve: no $BEACON_BIN/beacon-serve")
    for t in tests:
        t0 = time.time()
        t()
        print(f"ok {t.__name__} ({time.time() - t0:.1f}s)")


if __name__ == "__main__":
    main()
