"""The inference gateway's objects (deploy/k8s/components/inference-gateway and
inference-gateway-flags), checked structurally for test_k8s_manifests.py: the
InferencePool selects the beacon-serve pods on their HTTP port, the endpoint
picker's Service, Deployment, RBAC and HTTPRoute resolve, and the EPP reads
beacon-serve's metrics, on its admin port, in either form: the EndpointPickerConfig one (EPP
v1.4+: a metrics data source on /metrics wired to an extractor with
per-engine metric names) or the older flag one (EPP up to v1.2)."""
import os
import re

import yaml

from k8s_util import SRC, arg_value, container, find, matches, one, port_number

# The metric families' names live in server/ops/metric_names.h (one table for both namings).
METRICS_SRC = open(os.path.join(SRC, "server", "ops", "metric_names.h")).read()
# The model-server protocol's gauges (queued, running, KV usage) in either naming, and the EPP flags of the
# older form that named them.
BEACON_SIGNALS = ("beacon_num_requests_waiting", "beacon_num_requests_running", "beacon_kv_cache_usage_perc")
VLLM_SIGNALS = ("vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc")
METRIC_FLAGS = ("--total-queued-requests-metric", "--total-running-requests-metric",
                "--kv-cache-usage-percentage-metric")


def check_inference_gateway(objs, namespace):
    """Checks the InferencePool, its endpoint picker and route; returns (None, "config" or "flags"): which
    form of the EPP's metric configuration the objects use."""
    pool = one(objs, "InferencePool")
    spec = pool["spec"]
    d = one(objs, "Deployment", "beacon-serve")
    assert matches(spec["selector"]["matchLabels"], d["spec"]["template"]["metadata"]["labels"])
    assert [p["number"] for p in spec["targetPorts"]] == [port_number(container(d, "beacon-serve"), "http")]
    ref = spec["endpointPickerRef"]
    assert ref.get("kind", "Service") == "Service" and ref.get("failureMode", "FailClose") in ("FailOpen",
                                                                                                "FailClose")
    svc = one(objs, "Service", ref["name"])
    sp = next(p for p in svc["spec"]["ports"] if p["port"] == ref["port"]["number"])
    epp = one(objs, "Deployment", "beacon-serve-epp")
    assert matches(svc["spec"]["selector"], epp["spec"]["template"]["metadata"]["labels"])
    ec = container(epp, "epp")
    assert port_number(ec, sp["targetPort"]) == int(arg_value(ec["args"], "--grpc-port"))
    args = ec["args"]
    assert arg_value(args, "--pool-name") == pool["metadata"]["name"]
    assert arg_value(args, "--pool-namespace") == namespace
    # The EPP's plugins configuration: a ConfigMap it mounts.
    vol = next(v for v in epp["spec"]["template"]["spec"]["volumes"] if "configMap" in v)
    cfg_file = arg_value(args, "--config-file")
    mount = next(m for m in ec["volumeMounts"] if m["name"] == vol["name"])
    cm = one(objs, "ConfigMap", vol["configMap"]["name"])
    cfg = yaml.safe_load(cm["data"][os.path.relpath(cfg_file, mount["mountPath"])])
    assert cfg["kind"] == "EndpointPickerConfig"
    # A plugin is referred to by its name, which defaults to its type.
    plugins = {p.get("name", p["type"]): p for p in cfg["plugins"]}
    types = {p["type"] for p in cfg["plugins"]}
    assert {"queue-scorer", "kv-cache-utilization-scorer", "prefix-cache-scorer"} <= types, types
    for prof in cfg["schedulingProfiles"]:
        assert {r["pluginRef"] for r in prof["plugins"]} <= set(plugins), (prof, sorted(plugins))
        # Prefix affinity routes a shared prompt to the pod whose prefix cache holds it.
        assert "prefix-cache-scorer" in {r["pluginRef"] for r in prof["plugins"]}, prof
    # beacon-serve serves /metrics on its admin port only (--admin-port, issue 46): the EPP scrapes there.
    serve_c = container(d, "beacon-serve")
    assert arg_value(args, "--model-server-metrics-port") == str(port_number(serve_c, "admin")), args
    tag = tuple(int(x) for x in re.search(r":v(\d+)\.(\d+)\.\d+$", ec["image"]).groups())
    flags = [f for f in METRIC_FLAGS if arg_value(args, f) is not None]
    if flags:
        # The older form (EPP <= v1.2): the metric names as flags.
        assert tag <= (1, 2), (ec["image"], "metric flags are for EPP releases up to v1.2")
        metrics = {f: arg_value(args, f) for f in METRIC_FLAGS}
        assert metrics == dict(zip(METRIC_FLAGS, BEACON_SIGNALS)), metrics
        assert arg_value(args, "--lora-info-metric") == "" and arg_value(args, "--cache-info-metric") == ""
        for m in metrics.values():
            assert f'"{m}"' in METRICS_SRC, f"{m} is not a metric of server/ops/metric_names.h"
        return _check_epp_rbac_and_route(objs, epp, pool, d, namespace), "flags"
    # The current form (EPP >= v1.4): a metrics data source and an extractor with per-engine metric names.
    assert tag >= (1, 4), (ec["image"], "the EndpointPickerConfig metrics form needs EPP v1.4 or later")
    assert "dataLayer" in cfg.get("featureGates", []), cfg.get("featureGates")
    sources = [p for p in cfg["plugins"] if p["type"] == "metrics-data-source"]
    extractors = [p for p in cfg["plugins"] if p["type"] in ("model-server-protocol-metrics", "core-metrics-extractor")]
    assert len(sources) == 1 and len(extractors) == 1, (sources, extractors)
    # It scrapes /metrics over plain HTTP, on the port of --model-server-metrics-port (checked above).
    assert sources[0]["parameters"] == {"scheme": "http", "path": "/metrics"}, sources[0]
    wired = [(s["pluginRef"], [e["pluginRef"] for e in s["extractors"]]) for s in cfg["data"]["sources"]]
    assert wired == [(sources[0].get("name", sources[0]["type"]), [extractors[0].get("name", extractors[0]["type"])])], \
        wired
    params = extractors[0]["parameters"]
    engines = {e["name"]: e for e in params["engineConfigs"]}
    assert params["defaultEngine"] in engines, params
    label = d["spec"]["template"]["metadata"]["labels"].get(params.get("engineLabelKey",
                                                                       "inference.networking.k8s.io/engine-type"))
    assert (label or params["defaultEngine"]) == "beacon", (label, params["defaultEngine"])
    want = {"beacon": BEACON_SIGNALS, "vllm": VLLM_SIGNALS}
    assert set(engines) == set(want), sorted(engines)
    for name, e in engines.items():
        got = (e["queuedRequestsSpec"], e["runningRequestsSpec"], e["kvUsageSpec"])
        assert got == want[name], (name, got)
        for m in got:
            assert f'"{m}"' in METRICS_SRC, f"{name}: {m} is not a metric of server/ops/metric_names.h"
        # No LoRA adapters, no cache-config info series: empty specs, not the EPP's vLLM defaults.
        assert e.get("loraSpec") == "" and e.get("cacheInfoSpec") == "", e
    return _check_epp_rbac_and_route(objs, epp, pool, d, namespace), "config"


def _check_epp_rbac_and_route(objs, epp, pool, d, namespace):
    # RBAC: the EPP's service account may read its pool and the pods.
    sa = epp["spec"]["template"]["spec"]["serviceAccountName"]
    one(objs, "ServiceAccount", sa)
    for b in find(objs, "RoleBinding") + find(objs, "ClusterRoleBinding"):
        for s in b["subjects"]:
            if s["name"] == sa:
                assert s.get("namespace", namespace) == namespace, b
    rules = [r for b in find(objs, "RoleBinding") if any(s["name"] == sa for s in b["subjects"])
             for r in one(objs, "Role", b["roleRef"]["name"])["rules"]]
    assert any("inference.networking.k8s.io" in r["apiGroups"] and "inferencepools" in r["resources"] for r in rules)
    assert any("" in r["apiGroups"] and "pods" in r["resources"] for r in rules)
    # The route sends the OpenAI API to the pool.
    route = one(objs, "HTTPRoute")
    refs = [b for r in route["spec"]["rules"] for b in r["backendRefs"]]
    assert refs and all(b["kind"] == "InferencePool" and b["name"] == pool["metadata"]["name"] and
                        b["group"] == "inference.networking.k8s.io" for b in refs), refs
    assert route["spec"]["parentRefs"], route
    # The EPP outlives the longest drain of the pool's pods.
    grace = d["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    assert epp["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] >= grace
