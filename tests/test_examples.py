"""The examples and the guide's runnable blocks run as documented."""

import re

import pytest

from conftest import ROOT, assert_ok, mpiws_run


@pytest.mark.parametrize(
    "name,n,expect",
    [
        ("hello", 4, "Hello from rank 3 of 4"),
        ("ring", 4, "token came back after visiting 4 ranks: [0, 1, 2, 3]"),
        ("compute_pi", 3, "pi ~= 3.14159265"),
        ("pingpong", 2, "GB/s"),
    ],
)
def test_example(tmp_path, name, n, expect):
    p = mpiws_run(n, (ROOT / "examples" / f"{name}.py").read_text(), tmp_path)
    assert_ok(p)
    assert expect in p.stdout


def guide_blocks():
    text = (ROOT / "docs" / "guide.md").read_text()
    for m in re.finditer(r"```python\n# run: mpiws run -n (\d+)( --keep-going)?\n(.*?)```", text, re.S):
        yield int(m.group(1)), bool(m.group(2)), m.group(3)


@pytest.mark.parametrize("n,keep_going,code", list(guide_blocks()))
def test_guide_block(tmp_path, n, keep_going, code):
    p = mpiws_run(n, code, tmp_path, keep_going=keep_going)
    if not keep_going:
        assert_ok(p)
        return
    # the failure example: a rank dies, the others carry on to the end
    assert p.returncode != 0 and "failed first" in p.stderr, p.stderr
    survivors = {line.split("]")[0] for line in p.stdout.splitlines() if "survivors' sum: 1" in line}
    assert survivors == {"[0", "[1"}, p.stdout + p.stderr


def test_guide_has_runnable_blocks():
    assert len(list(guide_blocks())) >= 5


def run_example(tmp_path, name, n, args=(), keep_going=False):
    return mpiws_run(n, (ROOT / "examples" / f"{name}.py").read_text(), tmp_path, args=args, keep_going=keep_going)


def primes_below(limit):
    sieve = bytearray([1]) * limit
    sieve[:2] = b"\0\0"
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, limit, i)))
    return sum(i for i in range(limit) if sieve[i])


STEAL_COUNTS = re.compile(r"^\[0\] rank (\d+) computed (\d+) tasks \((\d+) stolen\)$", re.M)


def test_work_stealing(tmp_path):
    p = run_example(tmp_path, "work_stealing", 4)
    assert_ok(p)
    out = p.stdout
    assert "[0] 200 tasks recorded exactly once, 200 computed\n" in out, out
    assert f"[0] sum of primes below 200000 = {primes_below(200_000)}: matches the serial computation" in out, out
    counts = [tuple(map(int, m)) for m in STEAL_COUNTS.findall(out)]
    assert sorted(r for r, _, _ in counts) == [0, 1, 2, 3], out
    assert sum(n for _, n, _ in counts) == 200, out  # nothing lost, nothing computed twice
    assert sum(s for _, _, s in counts) > 0, out  # rank 0 holds half the tasks: the others steal


def test_work_stealing_survives_a_dead_worker(tmp_path):
    p = run_example(tmp_path, "work_stealing", 4, args=("--kill", "2"), keep_going=True)
    out = p.stdout
    assert p.returncode == 1 and "rank 2 failed first" in p.stderr, out + p.stderr
    assert "[2] rank 2: exiting abruptly after 10 tasks (os._exit)" in out, out
    # rank 2 died with its pool unfinished: rank 0's handler takes all 34 of its tasks over
    assert "[0] rank 0: rank 2 is gone before reporting: its 34 tasks go into my pool" in out, out
    assert "[0] 200 tasks recorded exactly once, " in out and "lost with rank(s) [2] and redone: 34\n" in out, out
    assert f"[0] sum of primes below 200000 = {primes_below(200_000)}: matches the serial computation" in out, out
    counts = [tuple(map(int, m)) for m in STEAL_COUNTS.findall(out)]
    assert sorted(r for r, _, _ in counts) == [0, 1, 3], out
    assert sum(n for _, n, _ in counts) >= 200 - 10, out  # all but what rank 2 computed before it died
    # only rank 2 was ever taken for gone
    assert set(re.findall(r"rank (\d+) (?:is gone|died)|asked rank (\d+) for work: gone", out)) <= {
        ("2", ""),
        ("", "2"),
    }, out


def test_order_manager(tmp_path):
    p = run_example(tmp_path, "order_manager", 4)
    assert_ok(p)
    out = p.stdout
    assert "[0] books consistent" in out, out
    m = re.search(
        r"orders: 24, filled: (\d+) \((\d+) after re-routing\), expired: (\d+) \[([\d, ]*)\], "
        r"filled quantity: (\d+)",
        out,
    )
    t = re.search(
        r"timed out: (\d+) attempts = (\d+) re-routed \+ (\d+) expired; "
        r"of these, cancelled in time: (\d+), filled late \(ignored\): (\d+)",
        out,
    )
    assert m and t, out
    filled, after, expired, expired_ids, qty = int(m[1]), int(m[2]), int(m[3]), m[4], int(m[5])
    timed_out, rerouted, expired2, cancelled, late = map(int, t.groups())
    assert filled + expired == 24 and expired == expired2 >= 1 and rerouted >= 1, out
    assert timed_out == rerouted + expired == cancelled + late, out
    assert after <= rerouted and qty <= sum(10 * (1 + i % 5) for i in range(24)), out
    # the event lines agree with the summary: one per timed-out attempt, one per late fill
    timeouts = re.findall(
        r"order (\d+) \(attempt (\d)\): no fill from trader \d within [\d.]+ s: "
        r"cancelled, (re-routed|expired)",
        out,
    )
    assert len(timeouts) == timed_out, out
    assert sorted(int(o) for o, _, what in timeouts if what == "expired") == [
        int(i) for i in expired_ids.split(", ") if i
    ], out
    lates = re.findall(r"late fill of order (\d+) \(attempt (\d)\) from trader \d: ignored", out)
    assert len(lates) == late and set(lates) <= {(o, a) for o, a, _ in timeouts}, out
