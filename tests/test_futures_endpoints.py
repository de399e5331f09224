"""``mpiws.futures`` workers on endpoints: a second endpoint process
(``mpiws serve``) deploys the futures worker service; an executor farms
work to it by URL, beside local workers, and endpoints join a running map.
An endpoint that serves the worker with the restricted unpickler refuses."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import mpiws_serve

MPIWS = Path(sys.executable).with_name("mpiws")

PROGRAM = """
import os, sys, time
from mpiws.futures import MPIPoolExecutor, BrokenExecutor

def where(x):
    time.sleep(0.01)
    return x * x, os.getpid()

if __name__ == "__main__":
    url = sys.argv[1]
{body}
"""


@pytest.fixture()
def keyed(tmp_path):
    env = dict(os.environ, MPIWS_KEY_FILE=str(tmp_path / "key"), MPIWS_FAILURE_TIMEOUT="2")
    env.pop("MPIWS_KEY", None)
    return env


def serve(env, pickle="full", tls=()):
    return mpiws_serve(["--service", "futures=mpiws.futures.endpoints:worker", "--pickle", pickle, *tls], env=env)


def run(tmp_path, env, url, body, timeout=240):
    # The program lives where the endpoint never looks: its source travels.
    (tmp_path / "prog").mkdir(exist_ok=True)
    prog = tmp_path / "prog" / "farm_endpoints.py"
    prog.write_text(PROGRAM.replace("{body}", textwrap.indent(textwrap.dedent(body), "    ")))
    return subprocess.run(
        [sys.executable, str(prog), url],
        cwd=tmp_path / "prog",
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_workers_on_an_endpoint_beside_local_ones_and_joining_a_running_map(tmp_path, keyed):
    server, url = serve(keyed)
    try:
        out = run(
            tmp_path,
            keyed,
            url,
            """
        with MPIPoolExecutor(endpoints=[url, url]) as ex:
            assert ex.num_workers == 2
            results = list(ex.map(where, range(200)))
            assert [r for r, _ in results] == [x * x for x in range(200)]
            assert os.getpid() not in {p for _, p in results}
            keys = {s["worker"] for s in ex.worker_stats()}
            assert keys == {url, url + " #2"}, keys
        with MPIPoolExecutor(max_workers=1, endpoints=[url]) as ex:
            assert ex.num_workers == 2
            assert [r for r, _ in ex.map(where, range(300))] == [x * x for x in range(300)]
            stats = {s["worker"]: s["tasks"] for s in ex.worker_stats()}
            assert set(stats) == {0, url} and all(n > 0 for n in stats.values()), stats
        # elastic: no worker at first; endpoints join while the map runs
        with MPIPoolExecutor(endpoints=[]) as ex:
            fs = [ex.submit(where, i) for i in range(400)]
            time.sleep(0.5)
            assert not any(f.done() for f in fs)
            ex.add_endpoints(url)
            while sum(f.done() for f in fs) < 20:
                time.sleep(0.01)
            assert not all(f.done() for f in fs)
            ex.add_endpoints(url)
            assert [f.result()[0] for f in fs] == [x * x for x in range(400)]
            stats = {s["worker"]: s["tasks"] for s in ex.worker_stats()}
            assert len(stats) == 2 and all(n > 0 for n in stats.values()), stats
        print("ok")
        """,
        )
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-4000:]
    finally:
        server.kill()


def test_an_endpoint_with_the_restricted_unpickler_runs_no_client_code(tmp_path, keyed):
    server, url = serve(keyed, pickle="restricted")
    try:
        out = run(
            tmp_path,
            keyed,
            url,
            """
        ex = MPIPoolExecutor(endpoints=[url])
        f = ex.submit(where, 3)
        e = f.exception(timeout=120)
        assert isinstance(e, BrokenExecutor), e
        print("refused:", e)
        """,
        )
        assert out.returncode == 0 and "refused:" in out.stdout, out.stdout + out.stderr[-4000:]
        assert "pickle full" in out.stdout, out.stdout  # the worker's own refusal reaches the client
    finally:
        server.kill()


def test_without_the_endpoints_key_no_worker_starts(tmp_path, keyed):
    server, url = serve(keyed)
    try:
        out = run(
            tmp_path,
            dict(keyed, MPIWS_KEY="not-the-key"),
            url,
            """
        ex = MPIPoolExecutor(endpoints=[url])
        e = ex.submit(where, 3).exception(timeout=120)
        assert isinstance(e, BrokenExecutor) and ("401" in str(e) or "key" in str(e).lower()), e
        print("refused:", e)
        """,
        )
        assert out.returncode == 0 and "refused:" in out.stdout, out.stdout + out.stderr[-4000:]
    finally:
        server.kill()


def test_a_worker_on_a_tls_endpoint(tmp_path, keyed):
    cert = tmp_path / "cert.pem"
    server, url = serve(keyed, tls=("--tls-self-signed", "--tls-cert-out", str(cert)))
    try:
        assert url.startswith("https://")
        out = run(
            tmp_path,
            dict(keyed, MPIWS_CA_FILE=str(cert)),
            url,
            """
        with MPIPoolExecutor(endpoints=[url]) as ex:
            assert [r for r, _ in ex.map(where, range(50))] == [x * x for x in range(50)]
        print("ok")
        """,
        )
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-4000:]
        out = run(
            tmp_path,
            keyed,
            url,
            """
        e = MPIPoolExecutor(endpoints=[url]).submit(where, 1).exception(timeout=120)
        print("refused:", e)
        """,
        )
        assert "refused:" in out.stdout and "certificate" in out.stdout.lower(), out.stdout + out.stderr[-3000:]
    finally:
        server.kill()


def test_a_worker_ended_on_its_endpoint_mid_map_has_its_tasks_redone(tmp_path, keyed):
    server, url = serve(keyed)
    try:
        out = run(
            tmp_path,
            dict(keyed, MPIWS_FUTURES_ENDPOINTS=f"{url},{url}"),
            url,
            """
        with MPIPoolExecutor() as ex:  # the endpoints from MPIWS_FUTURES_ENDPOINTS
            assert ex.num_workers == 2
            fs = [ex.submit(where, i) for i in range(300)]
            while sum(f.done() for f in fs) < 30:
                time.sleep(0.01)
            ex.remove_endpoints(url + " #2")
            assert [f.result(timeout=120)[0] for f in fs] == [x * x for x in range(300)]
            stats = {s["worker"]: s for s in ex.worker_stats()}
            assert stats[url + " #2"]["lost"] and stats[url]["lost"] is None, stats
            assert stats[url]["tasks"] + stats[url + " #2"]["tasks"] >= 300, stats
        print("ok")
        """,
        )
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-4000:]
    finally:
        server.kill()


def test_workers_reach_the_executor_at_its_advertised_url(tmp_path, keyed):
    server, url = serve(keyed)
    try:
        out = run(
            tmp_path,
            keyed,
            url,
            """
        import socket, threading
        from mpiws import binding
        own = binding.process_endpoint().url  # this process's endpoint, made on first use
        port = int(own.rsplit(":", 1)[1])
        carried = [0]

        def pipe(a, b):
            while (data := a.recv(65536)):
                carried[0] += len(data)
                b.sendall(data)
            b.shutdown(socket.SHUT_WR)

        relay = socket.create_server(("127.0.0.1", 0))
        def accept():
            while True:
                c, _ = relay.accept()
                s = socket.create_connection(("127.0.0.1", port))
                threading.Thread(target=pipe, args=(c, s), daemon=True).start()
                threading.Thread(target=pipe, args=(s, c), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()
        advertised = "http://127.0.0.1:%d" % relay.getsockname()[1]
        with MPIPoolExecutor(endpoints=[url], advertise=advertised) as ex:
            assert [r for r, _ in ex.map(where, range(40))] == [x * x for x in range(40)]
        assert carried[0] > 40 * 8, carried  # the results came through the relay
        print("ok", carried[0])
        """,
        )
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-4000:]
    finally:
        server.kill()


def test_an_endpoint_that_cannot_start_its_worker_is_left_out(tmp_path, keyed):
    """One endpoint of two is gone when the executor starts (chaos trials:
    an endpoint killed as the farm starts): the other's worker farms every
    task, and a warning names the one left out; only with no worker at all
    is the executor broken."""
    import socket

    s = socket.create_server(("127.0.0.1", 0))
    gone = "http://127.0.0.1:%d" % s.getsockname()[1]
    s.close()  # nothing listens there now
    server, url = serve(keyed)
    try:
        out = run(
            tmp_path,
            keyed,
            url,
            f"""
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with MPIPoolExecutor(endpoints=["{gone}", url]) as ex:
                assert [r for r, _ in ex.map(where, range(50))] == [x * x for x in range(50)]
                assert ex.num_workers == 1, ex.num_workers
        assert any("{gone}" in str(w.message) for w in caught), [str(w.message) for w in caught]
        e = MPIPoolExecutor(endpoints=["{gone}"]).submit(where, 1).exception(timeout=120)
        assert isinstance(e, BrokenExecutor) and "{gone}" in str(e), e
        print("ok")
        """,
        )
        assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr[-4000:]
    finally:
        server.kill()
