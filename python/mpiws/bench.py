"""``mpiws bench [SUITE ...] [--quick] [--ranks ...] [--out DIR]``: the
evaluation suite against MPI in one command.

Runs the benchmark suites (``benchmarks/<suite>/`` of the source checkout this
mpiws is installed from: ``benchmarks_dir``), each of which measures mpiws
and mpi4py + MPICH alternately in the same run,
then gathers what they wrote into one directory: per suite ``results.json``,
``table.md`` and PNG plots, the tables again as CSV, and ``report.md`` with
every table and plot. It installs nothing: without mpi4py/MPICH the suites
say how to get them and measure mpiws alone; without numpy (the rank
programs' buffers) or without the suites (a wheel ships only the ``mpiws``
package: the suites, their rank programs, the example applications they run
and the tools they build live in the source tree) it says in one line what to
get and measures nothing.
"""

import csv
import re
import subprocess
import sys
import time
from pathlib import Path

# suite -> whether it takes --ranks
SUITES = {
    "pingpong": False,
    "collectives": True,
    "overlap": False,
    "rma": True,
    "apps": True,
    "wan": False,
    "farm": True,
    "workflows": False,
    "scale": True,
}
# suite -> its flag for the part behind emulated wide-area links that ``--wan`` adds
WAN_PARTS = {"farm": "--with-wan", "workflows": "--with-wan"}


def benchmarks_dir():
    """The suites: ``benchmarks/`` of the source checkout the package is used from (``python/mpiws``
    beside it, as ``maturin develop`` or ``pip install -e`` leave it), or None (installed from a wheel:
    the suites are not in it)."""
    root = Path(__file__).resolve().parent.parent.parent  # python/mpiws -> the checkout
    d = root / "benchmarks"
    if (root / "pyproject.toml").exists() and (d / "common.py").exists() and (d / "pingpong" / "driver.py").exists():
        return d
    return None


NO_SUITES = (
    "mpiws bench: the benchmark suites are not installed with mpiws (the wheel ships only the package); they are "
    "in its source tree: in a checkout, scripts/setup.sh mpich mpi4py matplotlib, then .venv/bin/mpiws bench"
)
NO_NUMPY = "mpiws bench needs numpy (the suites' rank programs): pip install 'mpiws[bench]'"


def missing(bench):
    """Why the suites cannot run here, in one line, or None."""
    if bench is None:
        return NO_SUITES
    try:
        import numpy  # noqa: F401 - only whether it imports
    except ImportError:
        return NO_NUMPY
    return None


def default_out(bench):
    """Where results go without --out: ``benchmarks/results/bench`` of the checkout."""
    return bench / "results" / "bench"


def run_bench(suites, quick=False, ranks=None, out=None, rounds=None, wan=False):
    suites = suites or list(SUITES)
    for s in suites:
        if s not in SUITES:
            raise SystemExit("mpiws bench: unknown suite %r (have %s)" % (s, ", ".join(SUITES)))
    bench = benchmarks_dir()
    why = missing(bench)
    if why:  # nothing can be measured here: said in one line, not a failure
        print(why, file=sys.stderr, flush=True)
        return 0
    out = Path(out or default_out(bench)).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.time()
    done, failed = [], []
    for i, suite in enumerate(suites, 1):
        cmd = [sys.executable, str(bench / suite / "driver.py"), "--out", str(out / suite)]
        cmd += ["--quick"] if quick else []
        cmd += ["--ranks", ranks] if ranks and SUITES[suite] else []
        cmd += ["--rounds", str(rounds)] if rounds else []
        cmd += [WAN_PARTS[suite]] if wan and suite in WAN_PARTS else []
        print(
            "mpiws bench: [%d/%d] %s (%.0f s so far)" % (i, len(suites), suite, time.time() - started),
            file=sys.stderr,
            flush=True,
        )
        # The suites' progress goes to stderr as they run; their tables to table.md.
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL)
        (done if p.returncode == 0 else failed).append(suite)
        if p.returncode != 0:
            print("mpiws bench: %s exited %d" % (suite, p.returncode), file=sys.stderr, flush=True)
        if (out / suite / "table.md").exists():
            tables_to_csv(out / suite / "table.md")
    argv = (
        ["mpiws", "bench"]
        + suites
        + (["--quick"] if quick else [])
        + (["--ranks", ranks] if ranks else [])
        + (["--wan"] if wan else [])
    )
    report = write_report(out, suites, argv, time.time() - started)
    print(
        "mpiws bench: wrote %s (and per suite: results.json, table.md, *.csv, *.png) in %.0f s"
        % (report, time.time() - started),
        file=sys.stderr,
        flush=True,
    )
    return 1 if failed else 0


def tables_to_csv(table_md):
    """Each Markdown table of a suite's report as a CSV file beside it."""
    title, rows = None, []
    for line in table_md.read_text().splitlines() + [""]:
        if line.startswith("### "):
            title, rows = line[4:].strip(), []
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not all(set(c) <= set("-:") for c in cells):
                rows.append(cells)
        elif rows and title:
            name = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:60]
            with open(table_md.parent / (name + ".csv"), "w", newline="") as f:
                csv.writer(f).writerows(rows)
            title, rows = None, []


def write_report(out, suites, argv, seconds):
    """report.md: every suite's tables, with its plots."""
    sys.path.insert(0, str(benchmarks_dir()))
    import common  # the suites' shared code: how they describe the machine

    m = common.machine()
    parts = [
        "# mpiws benchmark report",
        "",
        "Command: `%s`, %s, %.0f s, on %s (%s cores, Python %s)."
        % (" ".join(argv), time.strftime("%Y-%m-%d %H:%M"), seconds, m.get("cpu", "?"), m["cores"], m["python"]),
        "",
    ]
    for suite in suites:
        table = out / suite / "table.md"
        parts += ["# %s" % suite, ""]
        if not table.exists():
            parts += ["(no results: the suite failed; see its output above)", ""]
            continue
        parts += [table.read_text(), ""]
        parts += ["![%s](%s/%s)" % (png.stem, suite, png.name) for png in sorted((out / suite).glob("*.png"))] + [""]
    report = out / "report.md"
    report.write_text("\n".join(parts))
    return report
