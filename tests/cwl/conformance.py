"""The CWL v1.2 conformance suite (vendored in tests/cwl/v1.2, see its
README) run by CWL's own test runner, cwltest, against mpiws-cwl-runner and,
beside it, the reference runner cwltool; prints the per-tag table (tests
selected, passed by each runner) and each runner's median time per test.

  tests/cwl/run                       # mpiws, every test but those needing Docker
  tests/cwl/run --runners mpiws,cwltool
  tests/cwl/run --tags required --floor 35   # exit 1 if mpiws passes fewer

Tests tagged ``docker`` need a container runtime: kept where the endpoint's
runner finds one (``mpiws.service.cwl_runner.containers``), left out for
every runner otherwise (``--with-docker`` keeps them anyway)."""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from mpiws.service.cwl_runner import containers

HERE = Path(__file__).resolve().parent
SUITE = HERE / "v1.2"
RUNNERS = {"mpiws": "mpiws-cwl-runner", "cwltool": "cwltool"}
#: Arguments each runner gets first: cwltool uses the container runtime mpiws's runner
#: found (a docker command without its daemon is none), as mpiws's runner does.
RUNNER_ARGS = {"mpiws": [], "cwltool": containers()}


def executable(name):
    """A runner's command: beside this interpreter (the project's venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if not found:
        sys.exit(f"cwl conformance: {name} not found (scripts/setup.sh installs it)")
    return found


def run_suite(runner, tags, exclude, jobs, timeout, out):
    """Run cwltest for one runner; {tag: (passed, failed, unsupported) name lists}, times of passed tests."""
    badges, junit = out / f"{runner}-badges", out / f"{runner}.xml"
    cmd = [executable("cwltest"), "--test", "conformance_tests.yaml", "--tool", executable(RUNNERS[runner])]
    cmd += ["-j", str(jobs), "--timeout", str(timeout), "--badgedir", str(badges), "--junit-xml", str(junit)]
    if tags:
        cmd += ["--tags", tags]
    if exclude:
        cmd += ["--exclude-tags", exclude]
    if RUNNER_ARGS[runner]:
        cmd += ["--", *RUNNER_ARGS[runner]]  # after "--": cwltest passes them to the runner
    started = time.monotonic()
    print(f"cwl conformance: {runner}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
    p = subprocess.run(cmd, cwd=SUITE, capture_output=True, text=True)
    summary = [line for line in p.stderr.splitlines() if re.search(r"tests? passed|failures|unsupported", line)]
    print(f"cwl conformance: {runner}: {'; '.join(summary) or p.stderr[-500:]} ({time.monotonic() - started:.0f} s)")
    if not badges.is_dir():
        sys.exit(f"cwl conformance: cwltest wrote no results for {runner} (exit {p.returncode})\n{p.stderr[-2000:]}")
    return read_results(badges, junit)


def read_results(badges, junit):
    """What cwltest wrote: {tag: {passed, failed, unsupported: test names}}, seconds of each passed test."""
    by_tag = {}
    for md in sorted(badges.glob("*.md")):
        lists, current = {"passed": [], "failed": [], "unsupported": []}, None
        for line in md.read_text().splitlines():
            m = re.match(r"## List of (\w+) tests", line)
            if m:
                current = m.group(1)
            elif line.startswith("- [") and current:
                lists[current].append(line[3:].split("]", 1)[0])
        by_tag[md.stem] = lists
    times = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        if case.find("failure") is None and case.find("skipped") is None and case.get("time"):
            times.append(float(case.get("time")))
    return by_tag, times


def table(results, runners):
    tags = sorted({t for r in results.values() for t in r[0]}, key=lambda t: (t != "all", t != "required", t))
    head = ["tag", "selected"] + runners
    rows = []
    for t in tags:
        selected = max(sum(len(v) for v in results[r][0].get(t, {}).values()) for r in runners)
        rows.append([t, str(selected)] + [str(len(results[r][0].get(t, {}).get("passed", []))) for r in runners])
    rows.append(
        ["median s per passed test", ""]
        + [f"{statistics.median(results[r][1]):.2f}" if results[r][1] else "-" for r in runners]
    )
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    line = lambda cells: "| " + " | ".join(c.rjust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(head), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"] + [line(r) for r in rows])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runners", default="mpiws", help="comma-separated: mpiws, cwltool (default: mpiws)")
    p.add_argument("--tags", help="only tests with one of these tags (comma-separated)")
    p.add_argument("--with-docker", action="store_true", help="keep the tests that need a container runtime")
    p.add_argument("-j", type=int, default=2, help="tests at once (default 2)")
    p.add_argument("--timeout", type=int, default=60, help="seconds per test (default 60)")
    p.add_argument("--floor", type=int, help="exit 1 if mpiws passes fewer of the selected tests")
    p.add_argument("--out", help="keep cwltest's results here (default: a temporary directory)")
    a = p.parse_args(argv)
    runners = [r.strip() for r in a.runners.split(",") if r.strip()]
    unknown = [r for r in runners if r not in RUNNERS]
    if unknown:
        p.error(f"unknown runner {', '.join(unknown)} (runners: {', '.join(RUNNERS)})")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="cwl-conformance-"))
    out.mkdir(parents=True, exist_ok=True)
    for r in runners:
        shutil.rmtree(out / f"{r}-badges", ignore_errors=True)
    # The runners' own temporary files stay under the output directory.
    os.environ.setdefault("TMPDIR", str(out))
    docker = a.with_docker or containers() != ["--no-container"]
    # mpiws's warm CWL runner (the first test starts it) is this run's own: it ends with its directory.
    runtime = Path(tempfile.mkdtemp(prefix="cwl-conformance-run-"))
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        results = {r: run_suite(r, a.tags, None if docker else "docker", a.j, a.timeout, out) for r in runners}
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    print(table(results, runners))
    if a.floor is not None and "mpiws" in results:
        passed = len(results["mpiws"][0].get("all", {}).get("passed", []))
        if passed < a.floor:
            print(f"cwl conformance: mpiws passed {passed}, below the floor of {a.floor}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
