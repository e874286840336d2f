"""A real Prometheus server for the metrics tests (test_prometheus.py,
test_prometheus_vllm.py): started on a free loopback port with a temporary
configuration that scrapes one target every second, queried through its HTTP
API. Needs /usr/bin/prometheus and /usr/bin/promtool (the Debian `prometheus`
package, installed by tools/bootstrap.sh); PROMETHEUS and PROMTOOL override
the paths."""
import json
import math
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

PROMETHEUS = os.environ.get("PROMETHEUS") or shutil.which("prometheus") or "/usr/bin/prometheus"
PROMTOOL = os.environ.get("PROMTOOL") or shutil.which("promtool") or "/usr/bin/promtool"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_labels(selector, inst):
    """`selector` (a metric name, optionally with matchers) with the matcher `inst` added."""
    if selector.endswith("}"):
        return selector[:-1] + ", " + inst + "}"
    return selector + "{" + inst + "}"


def close(a, b, rel=1e-9, abs_=1e-6):
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


class Prometheus:
    """A prometheus server on a free loopback port scraping `target` every second as job "beacon", with
    `rule_file` loaded and evaluated every second; its TSDB in a temp dir."""

    def __init__(self, target, rule_file):
        for b in (PROMETHEUS, PROMTOOL):
            if not os.access(b, os.X_OK):
                raise RuntimeError(f"{b} not found: apt-get install prometheus (tools/bootstrap.sh does)")
        self.dir = tempfile.mkdtemp(prefix="beacon-prom-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [rule_file],
            "scrape_configs": [{"job_name": "beacon", "static_configs": [{"targets": [target]}]}],
        }
        cfg = os.path.join(self.dir, "prometheus.yml")
        with open(cfg, "w") as f:
            json.dump(config, f)  # JSON is YAML
        self.log = open(os.path.join(self.dir, "prometheus.log"), "w+")
        self.proc = subprocess.Popen(
            [PROMETHEUS, f"--config.file={cfg}", f"--storage.tsdb.path={self.dir}/data",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)
        end = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if self.proc.poll() is not None or time.time() > end:
                raise RuntimeError(f"prometheus did not start:\n{self.read_log()}")
            time.sleep(0.1)

    def read_log(self):
        self.log.flush()
        with open(self.log.name, errors="replace") as f:
            return f.read()

    def api(self, path, **params):
        url = f"{self.url}/api/v1/{path}?{urllib.parse.urlencode(params, doseq=True)}"
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read() or b"{}")
            raise AssertionError(f"{path} {params}: HTTP {e.code}: {body.get('errorType')}: {body.get('error')}")
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr, **params):
        """The instant vector (or scalar) `expr` gives now."""
        data = self.api("query", query=expr, **params)
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        assert data["resultType"] == "vector", (expr, data)
        return data["result"]

    def value(self, expr):
        """The one sample `expr` gives now, as a float."""
        r = self.query(expr)
        assert len(r) == 1, f"{expr}: expected one sample, got {r}"
        return float(r[0]["value"][1])

    def by(self, expr, label):
        return {s["metric"].get(label, ""): float(s["value"][1]) for s in self.query(expr)}

    def query_range(self, expr, start, end, step=1):
        data = self.api("query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=step)
        assert data["resultType"] == "matrix", (expr, data)
        return data["result"]

    def wait_for(self, expr, want, timeout=20):
        """Polls until the one sample of `expr` equals `want` (scrapes and rule evaluations catch up)."""
        end = time.time() + timeout
        got = None
        while time.time() < end:
            r = self.query(expr)
            got = float(r[0]["value"][1]) if len(r) == 1 else r
            if got == want:
                return
            time.sleep(0.2)
        raise AssertionError(f"{expr}: expected {want}, still {got} after {timeout}s")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)
