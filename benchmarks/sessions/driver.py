"""A chain of 4 jobs of one program (`cp`: each reads its input whole and
writes it whole, as a real step would), a file of N MiB passed from each to
the next, three ways in alternating rounds (medians; the ratios are what to
compare):

- session: the jobs run in one session and name the files there; each
  reads the file the last one wrote where it lies (nothing moves);
- url, one endpoint: each job is given the last one's output by its URL;
  the endpoint sees it is its own file and copies it from disk;
- url, two endpoints: the jobs alternate between two endpoints, so each
  pulls the last one's output over HTTP (what by-reference passing costs
  when consecutive steps are on different machines).

The input is put on the endpoint first, untimed; the time is from the
first spawn to the last job's end, and the bytes written to the work
directories for the chain are measured (`du`).

Entry point: benchmarks/sessions/run [--quick] [--rounds R] [--mib N]
"""

import argparse
import os
import statistics
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

STEPS = 4
WAYS = ("session", "url-one", "url-two")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def serve(workdir, env):
    return common.serve(
        [
            "--program",
            "copy=cp [in:file:src:binary] [out:file:dst:binary]",
            "--fetch-allow",
            "127.0.0.1",
            "--workdir",
            str(workdir),
            "--max-disk",
            str(64 << 30),
            "--max-disk-per-key",
            str(64 << 30),
            "--max-session-disk",
            str(32 << 30),
            "--max-upload",
            str(16 << 30),
        ],
        env=env,
    )


def du(path):
    """Bytes in the regular files under ``path``."""
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and not f.is_symlink())


def chain_session(urls, data):
    from mpiws.jobs import Session

    with Session(urls[0]) as s:
        s.upload(data, "f0")
        copy = s.program("copy")
        t = time.perf_counter()
        for i in range(STEPS):
            r = copy.call(by="reference", src=s.file(f"f{i}"), dst=s.file(f"f{i + 1}"))
            assert r["state"] == "done", r
        took = time.perf_counter() - t
        written = s.status()["used"]
        assert s.files()[-1]["size"] == os.path.getsize(data)
    return took, written


def chain_urls(urls, data, workdirs):
    from mpiws.jobs import File, Job, Program, remove_upload, upload

    before = sum(du(w) for w in workdirs)
    up = upload(urls[0], data)
    src, jobs = up["url"], []
    t = time.perf_counter()
    for i in range(STEPS):
        r = Program(f"{urls[i % len(urls)]}/programs/copy").call(by="reference", src=File(src))
        assert r["state"] == "done", r
        src = r["outputs"]["dst"]["url"]
        jobs.append(Job(r["outputs"]["dst"]["url"].rsplit("/files/", 1)[0]))
    took = time.perf_counter() - t
    written = sum(du(w) for w in workdirs) - before
    for j in jobs:
        j.remove()
    remove_upload(up["url"])
    return took, written


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--quick", action="store_true", help="32 MiB, one round")
    a.add_argument("--rounds", type=int, default=3)
    a.add_argument("--mib", type=int, default=256, help="the file's size (default 256 MiB)")
    args = a.parse_args()
    mib, rounds = (32, 1) if args.quick else (args.mib, args.rounds)
    tmp = Path(tempfile.mkdtemp(prefix="mpiws-bench-sessions-"))
    key_file = tmp / "keys"
    key = os.urandom(32).hex()
    key_file.write_text(f"{key} jobs files\n")
    key_file.chmod(0o600)
    os.environ["MPIWS_KEY"] = key
    env = dict(os.environ, MPIWS_KEY_FILE=str(key_file))
    data = tmp / "input.bin"
    with open(data, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    workdirs = [tmp / "w1", tmp / "w2"]
    servers = [serve(w, env) for w in workdirs]
    urls = [u for _, u in servers]
    times = {w: [] for w in WAYS}
    written = {w: [] for w in WAYS}
    try:
        for r in range(rounds):
            for way in WAYS:
                if way == "session":
                    took, wrote = chain_session(urls, data)
                else:
                    took, wrote = chain_urls(urls if way == "url-two" else urls[:1], data, workdirs)
                times[way].append(took)
                written[way].append(wrote)
                log(f"round {r + 1}/{rounds} {way}: {took:.2f} s, {wrote / (1 << 20):.0f} MiB written")
    finally:
        for p, _ in servers:
            p.terminate()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    base = statistics.median(times["session"])
    print(
        f"\n{STEPS} `cp` jobs in a chain, a {mib} MiB file passed from each to the next; medians of {rounds} alternating rounds\n"
    )
    print("| way | chain (s) | / session | MiB written for the chain |")
    print("|---|---:|---:|---:|")
    names = {
        "session": "one session",
        "url-one": "by URL, one endpoint (copied from disk)",
        "url-two": "by URL, two endpoints (HTTP)",
    }
    for way in WAYS:
        t = statistics.median(times[way])
        print(f"| {names[way]} | {t:.2f} | {t / base:.2f} | {statistics.median(written[way]) / (1 << 20):.0f} |")


if __name__ == "__main__":
    main()
