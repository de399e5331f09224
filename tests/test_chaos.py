"""Faults under load and over time (issue 28), the short forms of
``benchmarks/chaos/run`` and ``benchmarks/soak/run``.

Chaos: four seeded trials, one of each fault (a rank's instance process
killed, a whole endpoint killed, a link cut, a link stalled), each while a
domain exchanges sequence-numbered messages and collectives, a task farm
runs over the three endpoints and a workflow runs a step on each. Every
trial must end in time with no duplicate, no message delivered after its
failure was reported, every future settled once, the workflow done or
naming its failed step, and nothing left behind (processes, listening
sockets, temporary files).

Soak: one endpoint serves 200 domains (instances on threads) and 20,000
messages, another 24 domains (instances in processes); no process may
outlive it, descriptors must not grow with the domains, memory only within
a generous bound.
"""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
# Appended, not put first: both folders have a services.py, and the
# tests' own (tests/services.py) must stay the one `import services` finds.
sys.path.append(str(BENCH / "chaos"))
sys.path.append(str(BENCH / "soak"))

import chaos  # noqa: E402
import soak  # noqa: E402


@pytest.mark.parametrize("index", range(len(chaos.KINDS)), ids=chaos.KINDS)
def test_a_chaos_trial_ends_cleanly(index):
    o = chaos.Trial(index, seed=28, quick=True, log=None).run()
    assert o["kind"] == chaos.KINDS[index]
    assert not o.get("problems"), o
    assert not o["hang"] and o["duplicates"] == 0 and o["after_failed"] == 0, o
    assert o["unsettled"] == 0 and o["leftovers"] == 0, o
    assert o["futures"]["done"] == o["futures"]["tasks"], o  # a lost worker's tasks are redone
    if o["kind"] != "stall-link":
        assert o["detect_s"], o  # the survivors were told


def test_the_scans_find_what_they_look_for(tmp_path):
    """The leftover checks see a marked process and a listening socket (so a
    clean trial is clean, not blind)."""
    import os
    import socket
    import subprocess
    import time

    marker = "CHAOS_TRIAL=scan-test"
    p = subprocess.Popen(["sleep", "30"], env=dict(os.environ, CHAOS_TRIAL="scan-test"))
    s = socket.create_server(("127.0.0.1", 0))
    try:
        # Popen returns once the child began its exec, which may not yet have
        # laid out the new environment that /proc/PID/environ shows.
        deadline = time.monotonic() + 5
        while chaos.marked_processes(marker) != [p.pid] and time.monotonic() < deadline:
            time.sleep(0.01)
        assert chaos.marked_processes(marker) == [p.pid]
        assert s.getsockname()[1] in chaos.listening_ports()
    finally:
        p.kill()
        p.wait()
        s.close()
    assert chaos.marked_processes(marker) == []


def _flat(samples, key, slack):
    """The second half of the samples stays within ``slack`` of the first half's peak."""
    values = [s[key] for s in samples]
    return max(values[len(values) // 2 :]) <= max(values[: len(values) // 2]) + slack, values


def test_soak_small_domains_on_threads_and_messages():
    report = soak.Soak(domains=200, messages=20000, concurrency=4, isolation="thread", samples=20).run()
    assert report["domain_failures"] == 0, report["domain_failure_examples"]
    assert report["message_failure"] is None and report["messages_out_of_order"] == 0
    assert report["leaked_processes"] == 0, report["leaked"]
    assert report["tmp_left"] == []
    # descriptors and threads come and go with the domains under way, but do not pile up
    ok, fds = _flat(report["domain_samples"], "fds", 16)
    assert ok, fds
    ok, threads = _flat(report["domain_samples"], "Threads", 8)
    assert ok, threads
    # memory: under 20 KiB per domain (keeping each domain's record would be far more)
    assert report["kib_per_1000_domains"] < 20_000, report["kib_per_1000_domains"]
    # the receiver: under 10 KiB per 1000 messages (keeping them would be far more)
    assert report["rank1_kib_per_100k_messages"] < 1000 * 10, report["rank1_kib_per_100k_messages"]


def test_soak_small_domains_in_processes():
    """Instances in processes (the default): every child ends, its descriptors with it."""
    report = soak.Soak(domains=24, messages=0, concurrency=4, isolation="process", samples=6).run()
    assert report["domain_failures"] == 0, report["domain_failure_examples"]
    assert report["leaked_processes"] == 0, report["leaked"]
    # While the run goes on, each ended instance's process lingers a few seconds (its peers may
    # still ask it about their messages), and its descriptors with it: looked at once they are gone.
    first, settled = report["domain_samples"][0], report["settled"]
    assert settled["processes"] <= soak.SPARES, settled
    assert settled["fds"] <= first["fds"] + 16, (first["fds"], settled["fds"])


def test_slope_is_the_second_halfs_least_squares_fit():
    assert soak.slope([(0, 100), (1, 0), (2, 4), (3, 6)], 1000) == 2000  # the first half is warm-up
    assert soak.slope([(0, 5)], 1) is None
