"""``mpiws bench``: one command runs a suite and gathers its report (the
suites themselves are benchmarks, not tests; this checks the plumbing)."""

import csv
import subprocess
import sys

from conftest import ROOT


def test_bench_writes_report_tables_csv_and_plots(tmp_path):
    out = tmp_path / "bench"
    p = subprocess.run([sys.executable, "-m", "mpiws", "bench", "pingpong", "--quick", "--rounds", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "[1/1] pingpong" in p.stderr  # progress
    report = (out / "report.md").read_text()
    assert "# pingpong" in report and "### Targets" in report and "](pingpong/pingpong-latency.png)" in report
    rows = list(csv.reader(open(out / "pingpong" / "targets.csv")))
    assert rows[0][:4] == ["target", "mpiws", "reference", "ratio"]
    assert any(r[0].startswith("8 B buffer latency") for r in rows[1:])
    latency = list(csv.reader(open(out / "pingpong" / "buffer-latency-send-recv-half-round-trip-us.csv")))
    assert latency[0][0] == "size" and len(latency) > 5 and float(latency[1][1]) > 0
    assert (out / "pingpong" / "pingpong-latency.png").stat().st_size > 1000


def test_bench_refuses_unknown_suites(tmp_path):
    p = subprocess.run([sys.executable, "-m", "mpiws", "bench", "nosuch", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode != 0 and "unknown suite 'nosuch'" in p.stderr
