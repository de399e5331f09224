"""Exactly once, in order, or a reported failure: messages between two
ranks pass through fault-injecting TCP proxies (tests/faultproxy.py) that
reset connections at random points and refuse some outright; every message
must arrive once, in order and intact, over streams and over HTTP stores."""

import os
import subprocess
import sys
import threading

import pytest

from conftest import ROOT
from faultproxy import FaultProxy
from mpiws.launch.domain import Domain

HANG_AFTER = float(os.environ.get("MPIWS_TEST_HANG_AFTER", 240))
TESTS = os.path.dirname(os.path.abspath(__file__))


def serve(env):
    e = dict(os.environ, PYTHONPATH=TESTS + os.pathsep + os.environ.get("PYTHONPATH", ""), **env)
    p = subprocess.Popen(
        [sys.executable, "-m", "mpiws", "serve", "--service", "exchange=delivery_service:exchange"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=e,
        cwd=ROOT,
    )
    line = p.stdout.readline()
    assert " at http://" in line, line
    return p, int(line.rsplit(":", 1)[1])


@pytest.mark.parametrize("channel,count", [("stream", 100_000), ("stores", 20_000)])
def test_every_message_arrives_once_in_order_through_resets(channel, count):
    env = {"MPIWS_STREAMS": "0"} if channel == "stores" else {}
    servers = [serve(env) for _ in range(2)]
    proxies = [FaultProxy(port, seed=i + 7, mean_bytes=2 << 20, refuse=0.2) for i, (_, port) in enumerate(servers)]
    try:
        domain = Domain([p.url for p in proxies])
        domain.start("exchange", {"count": count, "seed": 3})
        watchdog = threading.Timer(HANG_AFTER, domain.cancel_all)  # a hang fails the test
        watchdog.start()
        statuses, failure = domain.wait()
        watchdog.cancel()
        assert failure is None, failure
        assert [s["result"] for s in statuses] == [{"messages": count, "extra": False}] * 2
        faults = {k: sum(p.stats[k] for p in proxies) for k in proxies[0].stats}
        print(channel, faults)
        # The faults really happened: connections were cut and refused.
        assert faults["reset"] >= 10 and faults["refused"] >= 3, faults
    finally:
        for p in proxies:
            p.close()
        for s, _ in servers:
            s.terminate()
            s.wait(10)
