"""`GET /metrics` against a real Prometheus: two endpoints scraped with a
`metrics` key, a short run (jobs, a refusal by a limit, a bad request), then
Prometheus' query API gives the counters the run made. Also: the exposition
itself (names, types, bounded labels) and who may read it."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import mpiws_serve
from netns import install_packages

#: Keys: one with every scope but admin, a `metrics`-only one (Prometheus'), a `jobs`-only one.
KEY, KEY_METRICS, KEY_JOBS = "m" * 40 + "all", "m" * 40 + "met", "m" * 40 + "job"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(url, method="GET", key=KEY, body=None, headers=None):
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    h = {"authorization": f"Bearer {key}", **({"content-type": "application/json"} if isinstance(body, dict) else {})}
    req = urllib.request.Request(url, data=data, method=method, headers={**h, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


@pytest.fixture(scope="module")
def endpoints(tmp_path_factory):
    d = tmp_path_factory.mktemp("metrics")
    keys = d / "keys"
    keys.write_text(f"{KEY} run jobs files\n{KEY_METRICS} metrics\n{KEY_JOBS} jobs\n")
    keys.chmod(0o600)
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).parent))  # tests/services.py
    args = ["--keys", str(keys), "--program", "echo=echo [in:val:text:string]", "--max-jobs", "2"]
    started = [mpiws_serve([*args, "--service", "exchange=services:exchange"], env=env) for _ in range(2)]
    yield [url for _, url in started]
    for p, _ in started:
        p.kill()
        p.wait()


def scrape(url, key=KEY_METRICS):
    status, headers, body = call(f"{url}/metrics", key=key)
    assert status == 200, body
    return headers, body.decode()


def samples(text):
    """name{labels} -> value, from an exposition."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def test_the_exposition_is_prometheus_text_with_bounded_labels(endpoints):
    url = endpoints[0]
    call(f"{url}/programs/echo/call", "POST", body={"inputs": {"text": "hi"}})
    call(f"{url}/jobs/no-such-job")  # a 404: its route's template is the label, never the path asked
    headers, text = scrape(url)
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    got = samples(text)
    assert got['mpiws_http_requests_total{method="POST",route="/programs/{name}/call",code="200"}'] >= 1
    assert got['mpiws_http_requests_total{method="GET",route="/jobs/{id}",code="404"}'] >= 1
    assert not any("no-such-job" in s for s in got), "no label holds what a client sent"
    assert got['mpiws_jobs{state="done"}'] >= 1
    for name, kind in (
        ("mpiws_http_requests_total", "counter"),
        ("mpiws_http_request_duration_seconds", "histogram"),
        ("mpiws_limit_refusals_total", "counter"),
        ("mpiws_tls_handshakes_total", "counter"),
        ("mpiws_instances", "gauge"),
        ("mpiws_jobs", "gauge"),
        ("mpiws_sessions", "gauge"),
        ("mpiws_disk_used_bytes", "gauge"),
        ("mpiws_relay_connections", "gauge"),
        ("mpiws_fetches_total", "counter"),
    ):
        assert f"# TYPE {name} {kind}" in text, name
    for line in text.splitlines():  # the format's grammar: a name, labels, a number
        assert line.startswith("#") or re.fullmatch(r'[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? \S+', line), line


def test_messages_between_ranks_are_counted_where_their_instances_run(endpoints):
    """A domain of four ranks, two on each endpoint (each in a process of its own, as mpiws serve runs them):
    each rank sends one message to each other; each endpoint counts its instances' six sent and six received."""
    from mpiws.launch.domain import Domain

    before = [samples(scrape(u)[1]) for u in endpoints]
    d = Domain([endpoints[0], endpoints[0], endpoints[1], endpoints[1]], key=KEY)
    d.start("exchange", {"marker": "m"})
    _, failure = d.wait()
    assert failure is None, failure
    for url, was in zip(endpoints, before):
        now = samples(scrape(url)[1])
        grew = {
            k: now[k] - was.get(k, 0)
            for k in now
            if k.startswith(("mpiws_message", "mpiws_receive", "mpiws_instances_"))
        }
        assert grew["mpiws_messages_sent_total"] == 6 and grew["mpiws_messages_received_total"] == 6, grew
        assert grew["mpiws_message_bytes_sent_total"] > 0 and grew["mpiws_message_bytes_received_total"] > 0, grew
        # Each of its two ranks received three messages, each by one receive: six waits timed.
        assert grew["mpiws_receive_wait_seconds_count"] == 6, grew
        assert grew['mpiws_receive_wait_seconds_bucket{le="+Inf"}'] == 6, grew
        assert grew["mpiws_message_handling_seconds_count"] == 6, grew
        assert grew['mpiws_instances_ended_total{state="done"}'] == 2, grew
    # Each rank's own count, per peer, in its status (asked for): one message to each other rank, none to itself.
    for rank in range(4):
        status, _, body = call(f"{d.endpoints[rank]}/domains/{d.domain}/ranks/{rank}?traffic=true", key=d.token)
        assert status == 200, body
        traffic = json.loads(body)["traffic"]
        assert [m for m, _ in traffic["sent"]] == [0 if r == rank else 1 for r in range(4)], traffic
        assert [m for m, _ in traffic["received"]] == [0 if r == rank else 1 for r in range(4)], traffic
    assert "traffic" not in json.loads(call(f"{d.endpoints[0]}/domains/{d.domain}/ranks/0", key=d.token)[2])


def test_only_a_metrics_or_admin_key_reads_them(endpoints):
    assert call(f"{endpoints[0]}/metrics", key=KEY_JOBS)[0] == 403
    assert call(f"{endpoints[0]}/metrics", key="nobody")[0] == 401
    assert call(f"{endpoints[0]}/metrics", key=KEY_METRICS)[0] == 200


def test_a_real_prometheus_scrapes_two_endpoints_and_answers_for_the_run(endpoints, tmp_path):
    install_packages(prometheus="prometheus")
    binary = shutil.which("prometheus")
    token = tmp_path / "token"
    token.write_text(KEY_METRICS)
    port = free_port()
    targets = [urllib.parse.urlparse(u).netloc for u in endpoints]
    (tmp_path / "prometheus.yml").write_text(
        f"""
global: {{scrape_interval: 1s, scrape_timeout: 1s}}
scrape_configs:
  - job_name: mpiws
    authorization: {{type: Bearer, credentials_file: {token}}}
    static_configs: [{{targets: {json.dumps(targets)}}}]
"""
    )
    # The run: a job on each endpoint, and on the first a refusal by --max-jobs (2): three spawns of a long job.
    for url in endpoints:
        assert call(f"{url}/programs/echo/call", "POST", body={"inputs": {"text": "x"}})[0] == 200
    refused = [call(f"{endpoints[0]}/programs/echo/jobs", "POST", body={"inputs": {"text": "y"}})[0] for _ in range(3)]
    assert 503 in refused, refused
    prom = subprocess.Popen(
        [
            binary,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def query(q):
            u = f"http://127.0.0.1:{port}/api/v1/query?query={urllib.parse.quote(q)}"
            with urllib.request.urlopen(u, timeout=10) as r:
                return json.loads(r.read())["data"]["result"]

        deadline, got = time.monotonic() + 60, []
        while time.monotonic() < deadline:
            try:
                got = query('up{job="mpiws"}')
            except (urllib.error.URLError, ConnectionError):
                got = []
            if len(got) == 2 and all(r["value"][1] == "1" for r in got):
                break
            time.sleep(0.5)
        assert len(got) == 2 and all(r["value"][1] == "1" for r in got), got
        calls = query('sum by (instance) (mpiws_http_requests_total{route="/programs/{name}/call",code="200"})')
        assert {r["metric"]["instance"] for r in calls} == set(targets), calls
        assert all(float(r["value"][1]) >= 1 for r in calls)
        limited = query('mpiws_limit_refusals_total{limit="max_jobs",code="503"}')
        assert [r["metric"]["instance"] for r in limited] == [targets[0]], limited
        assert float(limited[0]["value"][1]) == refused.count(503)
    finally:
        prom.terminate()
        prom.wait()


def test_mpiws_status_says_what_this_users_endpoints_hold(tmp_path):
    """`mpiws status` with no URL finds the user's endpoints here (mpiws serve notes them), with a URL any."""
    env = dict(os.environ, MPIWS_KEY_FILE=str(tmp_path / "cfg" / "key"))
    env.pop("MPIWS_KEY", None)
    server, url = mpiws_serve(["--program", "echo=echo [in:val:text:string]", "--max-jobs", "1"], env=env)
    mpiws = [str(Path(sys.executable).with_name("mpiws")), "status"]
    try:
        key = (tmp_path / "cfg" / "key").read_text().split()[0]
        assert call(f"{url}/programs/echo/call", "POST", key=key, body={"inputs": {"text": "x"}})[0] == 200
        assert call(f"{url}/programs/echo/call", "POST", key=key, body={"inputs": {"text": "x"}})[0] == 503
        p = subprocess.run(mpiws, env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert lines[0].startswith(f"{url} (mpiws ") and f"pid {server.pid}" in lines[0], p.stdout
        for want in ("  programs   echo", "  jobs       1 done", "  sessions   0", "  refused    1 by max_jobs"):
            assert want in lines, (want, p.stdout)
        assert f"  dashboard  {url}/dashboard/" in lines, p.stdout
        p = subprocess.run([*mpiws, url, "--json"], env=env, capture_output=True, text=True, timeout=60)
        assert json.loads(p.stdout)[0]["described"]["programs"] == ["echo"]
    finally:
        server.kill()
        server.wait()
    p = subprocess.run(mpiws, env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "no endpoint of this user runs here" in p.stdout, p.stdout
    assert not list((tmp_path / "cfg" / "endpoints").iterdir()), "the gone endpoint's note is dropped"
