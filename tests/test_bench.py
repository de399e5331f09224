"""``mpiws bench``: one command runs a suite and gathers its report (the
suites themselves are benchmarks, not tests; this checks the plumbing and
that every part of a suite comes out with real numbers)."""

import csv
import os
import shutil
import subprocess
import sys

from conftest import ROOT


def mpiws_bench(*args, timeout=300):
    """``mpiws bench ARGS`` from the checkout: the finished process."""
    return subprocess.run(
        [sys.executable, "-m", "mpiws", "bench", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def read_csv(path):
    return list(csv.reader(open(path)))


def test_bench_writes_report_tables_csv_and_plots(tmp_path):
    out = tmp_path / "bench"
    p = mpiws_bench("pingpong", "--quick", "--rounds", "1", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    assert "[1/1] pingpong" in p.stderr  # progress
    report = (out / "report.md").read_text()
    assert "# pingpong" in report and "### Targets" in report and "](pingpong/pingpong-latency.png)" in report
    rows = read_csv(out / "pingpong" / "targets.csv")
    assert rows[0][:4] == ["target", "mpiws", "reference", "ratio"]
    assert any(r[0].startswith("8 B latency, same host") for r in rows[1:])
    assert any(r[0].startswith("8 B latency, network path") for r in rows[1:])
    latency = read_csv(out / "pingpong" / "buffer-latency-send-recv-half-round-trip-us.csv")
    assert latency[0][0] == "size" and len(latency) > 5 and float(latency[1][1]) > 0
    assert (out / "pingpong" / "pingpong-latency.png").stat().st_size > 1000

    # the exchange part: Sendrecv and Send-then-Receive at the quick sizes, and their ratio per implementation
    assert "### Exchange, Sendrecv: time per step (us)" in report and "](pingpong/pingpong-exchange.png)" in report
    quick_sizes = ["8 B", "4 KiB", "64 KiB", "1 MiB", "16 MiB"]
    for name in ("exchange-sendrecv-time-per-step-us", "exchange-send-then-receive-time-per-step-us"):
        rows = read_csv(out / "pingpong" / (name + ".csv"))
        assert rows[0][:2] == ["size", "mpiws"], rows[0]
        assert [r[0] for r in rows[1:]] == quick_sizes
        times = [float(r[1]) for r in rows[1:]]
        assert all(t > 0 for t in times) and times[-1] > times[0], times  # 16 MiB takes longer than 8 B
    rows = read_csv(out / "pingpong" / "exchange-sendrecv-send-then-receive-time-per-step.csv")
    assert rows[0][:2] == ["size", "mpiws"] and [r[0] for r in rows[1:]] == quick_sizes
    # a ratio of two real times (how big it is: the benchmark's report, not a test)
    assert all(0 < float(r[1]) < float("inf") for r in rows[1:]), rows
    assert (out / "pingpong" / "pingpong-exchange.png").stat().st_size > 1000


def test_collectives_matmul_and_vs_ranks(tmp_path):
    """The matmul-communication part (uneven blocks on 3 ranks) and the time-vs-ranks table and figure, gathered
    into report.md as ``mpiws bench`` does."""
    from mpiws.bench import tables_to_csv, write_report

    out = tmp_path / "bench"
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "collectives" / "driver.py"),
            "--quick",
            "--rounds",
            "1",
            "--ranks",
            "2,3",
            "--impls",
            "mpiws",
            "--out",
            str(out / "collectives"),
            "--",
            "--only",
            "matmul,bcast",
            "--max-size",
            str(1 << 20),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    tables_to_csv(out / "collectives" / "table.md")
    report = write_report(out, ["collectives"], ["test"], 0).read_text()
    for png in ("collectives-matmul.png", "collectives-vs-ranks.png", "collectives-bcast.png"):
        assert "](collectives/%s)" % png in report
        assert (out / "collectives" / png).stat().st_size > 1000
    assert "### Matmul communication, 3 ranks" in report and "### Time per call vs number of ranks (us)" in report

    for n, blocks in ((2, ["256 x 128", "1024 x 512"]), (3, ["256 x 85..86", "1024 x 341..342"])):
        [name] = list((out / "collectives").glob("matmul-communication-%d-ranks*.csv" % n))
        rows = read_csv(name)
        assert rows[0][:6] == ["N", "block", "block bytes", "binomial", "serial", "auto"], rows[0]
        assert [r[0] for r in rows[1:]] == ["256", "1024"] and [r[1] for r in rows[1:]] == blocks
        for r in rows[1:]:
            assert all(float(x) > 0 for x in r[3:6]), r

    rows = read_csv(out / "collectives" / "time-per-call-vs-number-of-ranks-us.csv")
    assert rows[0][:4] == ["collective", "size", "ranks", "mpiws auto"]
    got = {(r[0], r[1], r[2].split()[0]): float(r[3]) for r in rows[1:]}
    assert set(got) == {
        ("bcast", "1 MiB", "2"),
        ("bcast", "1 MiB", "3"),
        ("matmul", "N = 1024", "2"),
        ("matmul", "N = 1024", "3"),
    }, got
    assert all(t > 0 for t in got.values())


def test_rma_quick_tables_and_exact_counter(tmp_path):
    """``mpiws bench rma --quick``: put latency in three synchronisations, get bandwidth, accumulate latency and the
    contended counter at 2 and 3 ranks, with real numbers and an exact final count."""
    out = tmp_path / "bench"
    p = mpiws_bench("rma", "--quick", "--rounds", "1", "--ranks", "2,3", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "# rma" in report and "### Summary" in report and "](rma/rma-put-latency.png)" in report
    for mode in ("flush", "lock", "fence"):
        rows = read_csv(out / "rma" / ("put-latency-%s-synchronisation-us-per-put.csv" % mode))
        assert rows[0][:2] == ["size", "mpiws"] and [r[0] for r in rows[1:]] == [
            "1 B",
            "64 B",
            "4 KiB",
            "64 KiB",
            "1 MiB",
        ]
        assert all(float(r[1]) > 0 for r in rows[1:]), rows
    rows = read_csv(out / "rma" / "get-bandwidth-mb-s-1-mb-10-6-b.csv")
    assert rows[0][:3] == ["size", "window", "mpiws"] and all(float(r[2]) > 0 for r in rows[1:]), rows
    rows = read_csv(out / "rma" / "accumulate-latency-mpi-sum-on-float64-us-per-accumulate.csv")
    assert [r[1] for r in rows[1:]] == ["1", "512", "8192"] and all(float(r[2]) > 0 for r in rows[1:]), rows
    [rate] = (out / "rma").glob("shared-counter-fetch-and-op-1-on-rank-0-all-ranks-together*.csv")
    rows = read_csv(rate)
    assert [r[0].split()[0] for r in rows[1:]] == ["2", "3"] and all(float(r[1]) > 0 for r in rows[1:]), rows
    rows = read_csv(out / "rma" / "shared-counter-final-count.csv")
    assert [r[0] for r in rows[1:]] == ["2", "3"]
    assert all(c.startswith("exact") for r in rows[1:] for c in r[1:] if c != "-"), rows
    assert (out / "rma" / "rma-counter.png").stat().st_size > 1000


def test_farm_quick_completion_tiny_tasks_and_wire(tmp_path):
    """``mpiws bench farm --quick``: completion time against granularity, tiny-task throughput and the targets
    with real numbers for mpiws.futures (and whatever else is installed), the plots, and the bytes on the wire
    when tcpdump can capture here."""
    if os.geteuid() == 0 and shutil.which("apt-get") and not shutil.which("tcpdump"):
        from netns import install_packages  # the wire part captures loopback with tcpdump

        install_packages(tcpdump="tcpdump")
    out = tmp_path / "bench"
    p = mpiws_bench("farm", "--quick", "--rounds", "1", "--ranks", "2", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "# farm" in report and "### Targets (from the issue), 2 workers" in report
    for png in ("farm-completion.png", "farm-tasks-per-second.png"):
        assert "](farm/%s)" % png in report and (out / "farm" / png).stat().st_size > 1000
    rows = read_csv(out / "farm" / "completion-time-2-workers-s.csv")
    assert rows[0][:4] == ["g", "tasks", "ideal", "mpiws.futures"], rows[0]
    assert [r[0] for r in rows[1:]] == ["1", "10", "100", "1000"] and [r[1] for r in rows[1:]] == [
        "4000",
        "400",
        "40",
        "4",
    ]
    assert all(float(r[3]) > 0 for r in rows[1:]), rows
    for mode in ("submit", "map"):
        rows = read_csv(out / "farm" / ("tiny-tasks-%s-tasks-per-second.csv" % mode))
        assert rows[0][:2] == ["workers", "mpiws.futures"] and float(rows[1][1]) > 0, rows
    rows = read_csv(out / "farm" / "targets-from-the-issue-2-workers.csv")
    assert any(r[0].startswith("tiny-task throughput, `submit`") for r in rows[1:]), rows
    if shutil.which("tcpdump") and os.geteuid() == 0:
        rows = read_csv(out / "farm" / "bytes-on-the-wire-per-message-one-task-one-result.csv")
        mine = [r for r in rows[1:] if r[0] == "mpiws.futures"]
        assert [r[1] for r in mine] == ["8 B", "1 KiB", "64 KiB"], rows
        assert all(int(r[3]) >= int(r[2]) > 0 for r in mine), mine  # on the wire at least the pickled task


def test_farm_wan_quick_endpoints_behind_links(tmp_path):
    """``benchmarks/farm/run --wan --quick`` with a tiny workload (~15 s): workers on two endpoints behind Toxiproxy
    links and the master's endpoint behind one too, the default farm against one task at a time, loopback and 10 ms;
    the table, its CSV with real numbers, the plot, and the suite's own files left alone. Without Toxiproxy (no `go`
    to build it) the part says so and exits 0."""
    out = tmp_path / "farm"
    p = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "farm" / "driver.py"),
            "--wan",
            "--quick",
            "--rounds",
            "1",
            "--values",
            "200",
            "--grains",
            "1,10,100",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    table = (out / "wan-table.md").read_text()
    assert not (out / "table.md").exists() and not (out / "results.json").exists()  # the local suite's, untouched
    if "Not measured: Toxiproxy is not available" in table:
        assert shutil.which("go") is None, table
        return
    assert "### WAN farm: completion time (s) and tasks per second, 2 workers on endpoints" in table
    rows = read_csv(out / "wan-farm-completion-time-s-and-tasks-per-second-2-workers-on.csv")
    assert rows[0][:6] == ["link", "g", "tasks", "ideal", "default", "one at a time"], rows[0]
    assert [(r[0], r[1], r[2]) for r in rows[1:]] == [
        (link, g, t) for link in ("loopback", "10 ms") for g, t in (("1", "200"), ("10", "20"), ("100", "2"))
    ], rows
    assert all(float(x) > 0 for r in rows[1:] for x in r[3:]), rows
    by = {(r[0], r[1]): r for r in rows[1:]}
    # one task at a time across a 10 ms link: a round trip (>= 20 ms) per task and worker, 100 of them each
    assert float(by[("10 ms", "1")][5]) > 100 * 0.020 * 0.9, by[("10 ms", "1")]
    assert float(by[("10 ms", "1")][4]) < float(by[("10 ms", "1")][5]), by[("10 ms", "1")]  # batches hide it
    rows = read_csv(out / "wan-farm-round-trips-and-the-pool-s-start.csv")
    rtt = {r[0]: r for r in rows[1:]}
    assert float(rtt["10 ms"][1]) >= 19 and float(rtt["10 ms"][2]) >= 19, rows  # through the links, both ways
    assert (out / "wan-completion.png").stat().st_size > 1000


def test_workflows_quick_direct_against_mediated_and_behind_a_slow_link(tmp_path):
    """``mpiws bench workflows --quick --wan``: every part with real numbers for both forms, the bytes through the
    manager as the 2-vs-16 count says, the plots, and the WAN part (the manager behind a Toxiproxy link) where
    direct messaging wins. Without Toxiproxy or tinyproxy the WAN part says why and the rest still counts."""
    from netns import install_packages

    if os.geteuid() == 0 and shutil.which("apt-get") and not shutil.which("tinyproxy"):
        install_packages(tinyproxy="tinyproxy")
    out = tmp_path / "bench"
    p = mpiws_bench("workflows", "--quick", "--wan", "--out", str(out), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    d = out / "workflows"
    rows = read_csv(d / "chain-of-8-echo-services-direct-against-mediated-medians-s.csv")
    assert rows[0][:3] == ["size", "direct s", "mediated s"], rows[0]
    assert [r[0] for r in rows[1:]] == ["1 KiB", "1 MiB"]
    for r, n in zip(rows[1:], (1024, 1 << 20)):
        assert float(r[1]) > 0 and float(r[2]) > 0, r
        assert (int(r[6]), int(r[7])) == (2 * n, 16 * n), r  # in and out of the manager: once, or at every step
    rows = read_csv(d / "loop-of-4-services-an-allreduce-per-iteration-medians-s.csv")
    assert rows[1][0] == "10" and float(rows[1][4]) > 1, rows  # the loop in the domain is faster already at 10
    assert (d / "chain-ratio.png").stat().st_size > 1000 and (d / "loop-times.png").stat().st_size > 1000
    table = (d / "table.md").read_text()
    if "## Behind a slow link\n\nNot measured" in table:
        assert shutil.which("go") is None or not shutil.which("tinyproxy"), table
        return
    rows = read_csv(d / "wan-chain-of-8-echo-services-medians-s.csv")
    assert rows[1][0] == "1 KiB" and float(rows[-1][4]) > 2, rows  # behind the link, the manager's 16 moves cost


def test_scale_quick_start_up_latency_memory_and_sockets_per_rank(tmp_path):
    """``mpiws bench scale --quick`` at 2 and 4 ranks: every table has a real number for mpiws, and the counts are
    plausible (a rank holds at least one socket per peer it talked to, memory and threads are real)."""
    out = tmp_path / "bench"
    p = mpiws_bench("scale", "--quick", "--rounds", "1", "--ranks", "2,4", "--out", str(out))
    assert p.returncode == 0, p.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "# scale" in report and "](scale/scale.png)" in report

    def column(name):
        rows = read_csv(out / "scale" / name)
        assert rows[0][:2] == ["ranks", "mpiws"] and [r[0] for r in rows[1:]] == ["2", "4"], rows
        return [float(r[1]) for r in rows[1:]]

    assert all(0 < t < 60 for t in column("whole-launch-s.csv"))
    assert all(t > 0 for t in column("barrier-us.csv") + column("8-b-allreduce-us.csv"))
    assert all(5 < m < 500 for m in column("memory-per-rank-rss-mib.csv"))
    two, four = column("sockets-per-rank-most.csv")
    assert two >= 1 and four >= 3, (two, four)
    assert all(t >= 2 for t in column("threads-per-rank.csv"))
