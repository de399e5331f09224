"""Shared machinery for the mpiws benchmarks (ping-pong, collectives, ...).

Two halves:

* rank side: ``import_mpi()`` picks ``mpiws.MPI`` or ``mpi4py.MPI`` from the
  ``BENCH_MPI`` environment variable, so one rank program runs on both;
  ``emit()`` prints rank 0's result as one JSON line (prefixed, so stray
  output cannot be mistaken for it).
* driver side: the implementations to compare (``IMPLS``), launching a rank
  program under one of them (``launch``), alternating rounds
  (``alternate``), medians over rounds (``merge_rounds``), a table printer
  (``table``), JSON output and matplotlib plots (``plot``).

The driver side uses only the standard library except ``plot`` (matplotlib,
imported lazily), so this file can be imported inside rank processes too.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
VENV = ROOT / ".venv"
PYTHON = VENV / "bin" / "python"
SETUP_HINT = "cd %s && scripts/setup.sh mpich mpi4py matplotlib" % ROOT
RESULT_PREFIX = "BENCH-RESULT "


# ---------------------------------------------------------------- rank side


def import_mpi():
    """The MPI module named by BENCH_MPI (``mpi4py`` or, by default, mpiws)."""
    if os.environ.get("BENCH_MPI") == "mpi4py":
        from mpi4py import MPI
    else:
        from mpiws import MPI
    return MPI


def impl_name():
    return os.environ.get("BENCH_IMPL", "mpi4py" if os.environ.get("BENCH_MPI") == "mpi4py" else "mpiws")


def emit(result):
    """Print rank 0's result: one JSON line on stdout."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


# -------------------------------------------------------------- driver side


class Impl:
    """One implementation to compare: how to launch N ranks of a program."""

    def __init__(self, key, label, mpi, env=None):
        self.key, self.label, self.mpi, self.env = key, label, mpi, dict(env or {})

    def command(self, nranks, prog, args):
        if self.mpi == "mpiws":
            return [str(VENV / "bin" / "mpiws"), "run", "-n", str(nranks), str(prog), *map(str, args)]
        return [str(VENV / "bin" / "mpiexec"), "-n", str(nranks), str(PYTHON), str(prog), *map(str, args)]

    def environ(self):
        env = dict(os.environ)
        for k in ("BENCH_MPI", "MPIR_CVAR_NOLOCAL", "MPIR_CVAR_CH4_NETMOD", "FI_PROVIDER"):
            env.pop(k, None)
        env.update(self.env, BENCH_MPI=self.mpi, BENCH_IMPL=self.key, PYTHONUNBUFFERED="1")
        return env


IMPLS = {
    "mpiws": Impl("mpiws", "mpiws", "mpiws"),
    "mpi-tcp": Impl(
        "mpi-tcp", "MPI-TCP", "mpi4py", {"MPIR_CVAR_NOLOCAL": "1", "MPIR_CVAR_CH4_NETMOD": "ofi", "FI_PROVIDER": "tcp"}
    ),
    "mpi-shm": Impl("mpi-shm", "MPI-shm", "mpi4py"),
}
REFERENCES = ("mpi-tcp", "mpi-shm")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def arg_parser(suite, doc, quick, rounds, timeout, timeout_default=None, bench_args=True):
    """The options every driver shares (--quick, --out, --rounds, --impls,
    --timeout, --no-plots, and arguments for bench.py after --), with each
    one's help text; a driver adds its own."""
    import argparse

    ap = argparse.ArgumentParser(prog="benchmarks/%s/run" % suite, description=doc.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=quick)
    ap.add_argument("--out", default=str(BENCH_DIR / "results" / suite), help="output directory")
    ap.add_argument("--rounds", type=int, default=None, help="alternating rounds (%s)" % rounds)
    ap.add_argument("--impls", default=None, help="comma-separated subset of: " + ",".join(IMPLS))
    ap.add_argument(
        "--timeout",
        type=float,
        default=timeout_default,
        help="seconds per launch%s" % (" (%s)" % timeout if timeout else ""),
    )
    ap.add_argument("--no-plots", action="store_true")
    if bench_args:
        ap.add_argument("bench_args", nargs="*", help="extra arguments for bench.py (after --)")
    return ap


def check_setup():
    """The implementations that can run here; explains what is missing."""
    if not (VENV / "bin" / "mpiws").exists():
        log("bench: mpiws is not set up in %s; run: %s" % (VENV, SETUP_HINT))
        raise SystemExit(2)
    have = [k for k, impl in IMPLS.items() if impl.mpi == "mpiws"]  # mpiws and its variants a suite added
    missing = []
    if not (VENV / "bin" / "mpiexec").exists():
        missing.append("mpich (mpiexec)")
    if subprocess.run([str(PYTHON), "-c", "import mpi4py"], capture_output=True).returncode != 0:
        missing.append("mpi4py")
    if missing:
        log(
            "bench: %s not installed: measuring mpiws alone. For the comparison run:\n    %s"
            % (" and ".join(missing), SETUP_HINT)
        )
    else:
        have += list(REFERENCES)
    return have


def machine():
    """What to report with every figure."""
    info = {"cores": os.cpu_count(), "python": sys.version.split()[0], "host": os.uname().nodename}

    def git(*a):
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()

    try:
        info["git"] = git("rev-parse", "--short", "HEAD")
        info["git_dirty"] = [entry[3:] for entry in git("status", "--porcelain", "crates", "python").splitlines()]
        so = sorted(ROOT.glob("python/mpiws/_core*.so"))
        if so:
            info["mpiws_core_built"] = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(so[-1].stat().st_mtime))
    except OSError:
        pass
    try:
        info["load_avg"] = os.getloadavg()
    except OSError:
        pass
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return info


def run_meta(suite, a, argv, started, machine, rounds, impls, **fields):
    """What a suite's results.json and report say of its run: the machine's
    cores, the rounds, quick or not, the implementations and ``fields``
    (ranks, ...), when it started, how long it took, the machine (with its
    load at the end) and the command that reproduces it."""
    machine["load_avg_end"] = os.getloadavg()
    return dict(
        bench=suite,
        cores=machine["cores"],
        rounds=rounds,
        quick=a.quick,
        impls=impls,
        **fields,
        started=time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        seconds=round(time.time() - started, 1),
        machine=machine,
        command=" ".join(["benchmarks/%s/run" % suite] + (argv if argv is not None else sys.argv[1:])),
    )


class LaunchError(RuntimeError):
    pass


def launch(impl, prog, nranks, args=(), timeout=600, prefix=RESULT_PREFIX):
    """Run a rank program under an implementation; rank 0's JSON result
    (the line starting with ``prefix``)."""
    cmd = impl.command(nranks, prog, args)
    try:
        p = subprocess.run(cmd, env=impl.environ(), capture_output=True, text=True, timeout=timeout, cwd=str(ROOT))
    except subprocess.TimeoutExpired as e:
        raise LaunchError("%s: timed out after %ss\n%s" % (impl.key, timeout, _tail(e.stderr))) from e
    result = None
    for line in p.stdout.splitlines():
        if line.startswith(prefix):
            result = json.loads(line[len(prefix) :])
    if result is None:
        raise LaunchError(
            "%s: exit %s, no result line\n%s\n%s" % (impl.key, p.returncode, _tail(p.stdout), _tail(p.stderr))
        )
    if p.returncode != 0:
        # the measurements are complete (rank 0 printed them) but the program did not end cleanly:
        # keep them, and report the error
        result["exit_error"] = "exit %s after the result line: %s" % (p.returncode, _tail(p.stderr, 4))
    return result


def serve(args, env=None, cwd=None):
    """``mpiws serve ARGS`` started (its output read for its URL, the rest dropped): (the process, its URL)."""
    p = subprocess.Popen(
        [str(VENV / "bin" / "mpiws"), "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=cwd,
        text=True,
    )
    for line in p.stdout:
        if "http://" in line:
            return p, line[line.index("http://") :].split()[0]
    raise RuntimeError("mpiws serve did not say its URL")


def _tail(text, n=15):
    if not text:
        return ""
    if isinstance(text, bytes):
        text = text.decode(errors="replace")
    return "\n".join(text.splitlines()[-n:])


def alternate(impls, rounds, run_one):
    """Run ``run_one(impl)`` for A, B, C, A, B, C, ... ``rounds`` times.

    Returns {impl key: [result per successful round]} and a list of failures
    (``kept``: the launch exited non-zero after its result, which is used).
    Progress goes to stderr.
    """
    results = {i.key: [] for i in impls}
    failures = []
    t_start = time.time()
    for r in range(rounds):
        for impl in impls:
            log("[round %d/%d] %-8s ..." % (r + 1, rounds, impl.key))
            t0 = time.time()
            try:
                res = run_one(impl)
                results[impl.key].append(res)
                log(
                    "[round %d/%d] %-8s done in %.1fs (total %.0fs)"
                    % (r + 1, rounds, impl.key, time.time() - t0, time.time() - t_start)
                )
                if isinstance(res, dict) and res.get("exit_error"):
                    failures.append({"round": r + 1, "impl": impl.key, "error": res["exit_error"], "kept": True})
                    log(
                        "[round %d/%d] %-8s WARNING: results kept, but %s"
                        % (r + 1, rounds, impl.key, res["exit_error"])
                    )
            except LaunchError as e:
                failures.append({"round": r + 1, "impl": impl.key, "error": str(e)})
                log("[round %d/%d] %-8s FAILED after %.1fs:\n%s" % (r + 1, rounds, impl.key, time.time() - t0, e))
    return results, failures


def sweep(suite, impls, rounds, prog, points, timeout, unit="ranks", field="nranks"):
    """Each of ``points``, (n, args): the implementations alternated ``rounds`` times, each launched on n
    ranks with ``args``. Returns raw results {str(n): {impl: [round]}}, their medians {str(n): {impl:
    measurements}} and the failures, each with ``field`` = n."""
    raw, merged, failures = {}, {}, []
    for n, args in points:
        log("%s: --- %d %s ---" % (suite, n, unit))
        r, f = alternate(impls, rounds, lambda impl, n=n, args=args: launch(impl, prog, n, args, timeout=timeout))
        raw[str(n)] = r
        merged[str(n)] = {i.key: merge_rounds([x["measurements"] for x in r[i.key]]) for i in impls if r[i.key]}
        failures += [dict(x, **{field: n}) for x in f]
    return raw, merged, failures


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def merge_rounds(rounds):
    """Median per measurement over rounds.

    Each round is a list of measurement dicts with "kind", "key" and "t"
    (seconds); returns one list in the first-seen order, each with "t" the
    median, "t_min"/"t_max" the spread and "n" the number of rounds.
    """
    order, by = [], {}
    for rnd in rounds:
        for m in rnd:
            k = (m["kind"], str(m["key"]))
            if k not in by:
                order.append(k)
                by[k] = dict(m, ts=[])
            by[k]["ts"].append(m["t"])
    out = []
    for k in order:
        m = by[k]
        ts = m.pop("ts")
        m.update(t=median(ts), t_min=min(ts), t_max=max(ts), n=len(ts), rounds=ts)
        out.append(m)
    return out


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def paired_ratio(a, b):
    """a/b for two merged measurements taken in the same launches: the median
    over rounds of the per-round ratio (drift between rounds cancels), or the
    ratio of the medians if their rounds do not pair up."""
    if not a or not b:
        return None
    ra, rb = a.get("rounds") or [], b.get("rounds") or []
    if ra and len(ra) == len(rb) and all(rb):
        return median([x / y for x, y in zip(ra, rb)])
    return ratio(a["t"], b["t"])


def fmt(x, spec="%.1f"):
    return "-" if x is None else spec % x


def table(title, header, rows, note=None):
    """A markdown table as a string (printed to stdout and kept in table.md)."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells):
        return "| " + " | ".join(str(c).rjust(w) for c, w in zip(cells, widths)) + " |"

    out = ["### " + title, ""]
    if note:
        out += [note, ""]
    out += [line(header), "|" + "|".join("-" * (w + 1) + ":" for w in widths) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out) + "\n"


def provenance(machine):
    """The report line saying which mpiws was measured."""
    dirty = machine.get("git_dirty")
    return "mpiws: git %s%s, core built %s." % (
        machine.get("git", "?"),
        " + uncommitted changes in %d files" % len(dirty) if dirty else "",
        machine.get("mpiws_core_built", "?"),
    )


def failure_lines(failures, label):
    """Report lines for launches that failed: without a result (``lost``), or
    non-zero after printing it (``kept``). ``label(f)`` names a launch."""
    lost = [f for f in failures if not f.get("kept")]
    kept = [f for f in failures if f.get("kept")]
    lines = []
    if lost:
        lines += [
            "**Failed launches, no result: %d** (%s)."
            % (
                len(lost),
                ", ".join("%s: %s" % (label(f), (f["error"].strip().splitlines() or ["?"])[0]) for f in lost),
            ),
            "",
        ]
    if kept:
        errs = sorted({f["error"].splitlines()[-1].strip() for f in kept})
        lines += [
            "**Launches that exited non-zero after printing their result: %d** (%s; measurements kept). "
            "Error: %s" % (len(kept), ", ".join(label(f) for f in kept), " / ".join("`%s`" % e for e in errs)),
            "",
        ]
    return lines


def human_size(n):
    n = int(n)
    for unit, f in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= f and n % f == 0:
            return "%d %s" % (n // f, unit)
    return "%d B" % n


def write_json(path, data):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")


COLORS = {"mpiws": "tab:red", "mpi-tcp": "tab:blue", "mpi-shm": "tab:green"}


def plot(
    path,
    title,
    series,
    ylabel,
    transform=None,
    xlabel="message size (bytes)",
    subtitle=None,
    colors=None,
    styles=None,
    xticks=None,
):
    """Log-log plot of {impl key: [(size, t, t_min, t_max), ...]}.

    ``transform(size, t)`` maps a time to the plotted value (e.g. bandwidth);
    the band shows the spread (min..max) over rounds. A series' color is
    ``colors[key]``, else ``COLORS[key]``; its line style ``styles[key]``
    (default ``"o-"``). ``xticks``: the x values to label (as numbers), instead
    of the size ticks.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    transform = transform or (lambda size, t: t)
    fig, ax = plt.subplots(figsize=(8, 5))
    for key, pts in series.items():
        pts = [p for p in pts if p[0] > 0 and p[1]]
        if not pts:
            continue
        xs = [p[0] for p in pts]
        ys = [transform(p[0], p[1]) for p in pts]
        lo = [transform(p[0], p[2]) for p in pts]
        hi = [transform(p[0], p[3]) for p in pts]
        label = IMPLS[key].label if key in IMPLS else key
        color = (colors or {}).get(key, COLORS.get(key))
        ax.plot(xs, ys, (styles or {}).get(key, "o-"), ms=3, color=color, label=label)
        ax.fill_between(
            xs, [min(a, b) for a, b in zip(lo, hi)], [max(a, b) for a, b in zip(lo, hi)], color=color, alpha=0.15, lw=0
        )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title + ("\n" + subtitle if subtitle else ""), fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    if xticks:
        ax.set_xticks(xticks)
        ax.set_xticklabels([str(t) for t in xticks])
    else:
        sizes = [p[0] for pts in series.values() for p in pts if p[0] > 0]
        ticks = [
            x
            for x in (1, 16, 256, 4096, 1 << 16, 1 << 20, 1 << 24, 1 << 26)
            if not sizes or min(sizes) <= x <= max(sizes)
        ]
        ax.set_xticks(ticks)
        ax.set_xticklabels([human_size(t).replace(" ", "") for t in ticks])
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save(name, out, meta, merged, raw, failures, text, plots=None):
    """Print the report and write results.json, table.md and (with
    ``plots(out)``, needing matplotlib) the plots into ``out``."""
    print(text)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", dict(meta, results=merged, raw=raw, failures=failures))
    (out / "table.md").write_text(text)
    if plots is not None:
        try:
            plots(out)
        except ImportError:
            log("%s: matplotlib is missing, no plots; install with: %s" % (name, SETUP_HINT))
    return out


def save_suite(name, a, meta, merged, raw, failures, report, plots, measured):
    """``save`` for a suite driver: its ``report(meta, merged, failures)``, and
    its ``plots(out, meta, merged)`` unless ``--no-plots`` or nothing was
    ``measured``."""
    return save(
        name,
        a.out,
        meta,
        merged,
        raw,
        failures,
        report(meta, merged, failures),
        None if a.no_plots or not measured else (lambda o: plots(o, meta, merged)),
    )


def select(names):
    """(keys, Impls) for a comma-separated list of implementation names (all
    by default), keeping those this machine has (see ``check_setup``)."""
    have = check_setup()
    keys = names.split(",") if names else list(IMPLS)
    for k in keys:
        if k not in IMPLS:
            raise SystemExit("unknown implementation %r (have %s)" % (k, ", ".join(IMPLS)))
    keys = [k for k in keys if k in have]
    return keys, [IMPLS[k] for k in keys]
