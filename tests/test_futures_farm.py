"""``mpiws.futures`` as a task farm, with real worker processes: results in
order and exactly once on 1-8 workers, exceptions with their tracebacks,
tiny tasks batched, a slow task holding back no other result, a worker that
dies mid-map (its tasks redone elsewhere, every future settled once), a task
that kills every worker it reaches (it fails, the rest completes),
``shutdown(cancel_futures=True)``, a failing initializer, progress and
per-worker counts."""

import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = """
import os, sys, time, traceback
from mpiws.futures import MPIPoolExecutor, WorkerLost, BrokenExecutor, TaskTimeout

def square(x):
    return x * x

def fail(x):
    raise ValueError(f"no {x}")

def die_once(x, flag):
    # the first worker to run task 7 dies in it; whoever redoes it succeeds
    if x == 7 and not os.path.exists(flag):
        open(flag, "w").close()
        os._exit(3)
    time.sleep(0.01)
    return x, os.getpid()

def always_die(x):
    if x == 0:
        os._exit(4)
    time.sleep(0.02)
    return x

def lambda_free_spin(seconds):
    end = time.monotonic() + seconds
    n = 0
    while time.monotonic() < end:  # pure Python: interrupted by the limit
        n += 1
    return n

def bad_init():
    raise RuntimeError("no init")

{body}
"""


def run(tmp_path, body, timeout=180):
    """Run ``body`` as a program's main (workers import it, as in mpi4py)."""
    code = textwrap.dedent(PROGRAM).replace(
        "{body}", "if __name__ == '__main__':\n" + textwrap.indent(textwrap.dedent(body), "    ")
    )
    (tmp_path / "farm_main.py").write_text(code)
    environ = dict(os.environ, MPIWS_FAILURE_TIMEOUT="1")
    out = subprocess.run(
        [sys.executable, "farm_main.py"], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, env=environ
    )
    assert out.returncode == 0, out.stdout + out.stderr[-4000:]
    return out


@pytest.mark.parametrize("workers", [1, 3, 8])
def test_map_results_come_in_order_once_and_exceptions_with_their_tracebacks(tmp_path, workers):
    run(
        tmp_path,
        f"""
    with MPIPoolExecutor(max_workers={workers}) as ex:
        assert ex.num_workers == {workers}
        assert list(ex.map(square, range(300))) == [x * x for x in range(300)]
        assert list(ex.map(square, range(300), chunksize=13)) == [x * x for x in range(300)]
        assert sorted(ex.map(square, range(50), unordered=True)) == [x * x for x in range(50)]
        fs = [ex.submit(fail, i) if i % 10 == 3 else ex.submit(square, i) for i in range(100)]
        for i, f in enumerate(fs):
            if i % 10 == 3:
                e = f.exception()
                assert isinstance(e, ValueError) and str(e) == f"no {{i}}", e
                assert "in fail" in str(e.__cause__) and "Worker" in str(e.__cause__), e.__cause__
            else:
                assert f.result() == i * i
        stats = ex.worker_stats()
        assert sum(s["tasks"] for s in stats) > 0 and all(s["lost"] is None for s in stats), stats
    """,
    )


def test_tiny_tasks_are_batched_yet_a_slow_task_holds_back_no_other_result(tmp_path):
    run(
        tmp_path,
        """
    with MPIPoolExecutor(max_workers=2) as ex:
        assert list(ex.map(square, range(5000))) == [x * x for x in range(5000)]
        d = ex._pool.dispatcher
        assert d.task_time is not None and d.batch_size(queued=5000) > 1, (d.task_time, d.round_trip)
    with MPIPoolExecutor(max_workers=1) as ex:
        list(ex.map(square, range(1000)))  # tiny tasks measured: the next ones share a batch
        quick = [ex.submit(square, i) for i in range(20)]
        slow = ex.submit(time.sleep, 3)
        # the results before the slow task come back while it runs
        assert [f.result(timeout=2) for f in quick] == [i * i for i in range(20)]
        assert not slow.done()
    """,
    )


def test_a_worker_dying_mid_map_has_its_tasks_redone_and_every_future_settles_once(tmp_path):
    out = run(
        tmp_path,
        f"""
    flag = {str(tmp_path / "died")!r}
    with MPIPoolExecutor(max_workers=3) as ex:
        settled = []
        fs = [ex.submit(die_once, i, flag) for i in range(200)]
        for f in fs:
            f.add_done_callback(settled.append)
        results = [f.result() for f in fs]
        assert [x for x, _ in results] == list(range(200))
        assert len(settled) == 200 and len(set(map(id, settled))) == 200
        assert os.path.exists(flag)
        stats = ex.worker_stats()
        lost = [s for s in stats if s["lost"]]
        assert len(lost) == 1 and ("PROC_FAILED" in lost[0]["lost"] or "unreachable" in lost[0]["lost"]), stats
        assert len({{pid for _, pid in results}}) >= 2
        # the executor goes on with the workers it has
        assert list(ex.map(square, range(100))) == [x * x for x in range(100)]
        print("lost", lost[0]["worker"])
    """,
    )
    assert "lost " in out.stdout


def test_a_task_that_kills_every_worker_fails_after_its_retries_and_the_rest_completes(tmp_path):
    run(
        tmp_path,
        """
    with MPIPoolExecutor(max_workers=4, retries=1) as ex:
        fs = [ex.submit(always_die, i) for i in range(40)]
        e = fs[0].exception(timeout=60)
        assert isinstance(e, WorkerLost) and isinstance(e, BrokenExecutor), e
        assert [f.result(timeout=60) for f in fs[1:]] == list(range(1, 40))
        assert sum(1 for s in ex.worker_stats() if s["lost"]) == 2, ex.worker_stats()
    """,
    )


def test_when_every_worker_is_lost_the_futures_fail_instead_of_hanging(tmp_path):
    run(
        tmp_path,
        """
    with MPIPoolExecutor(max_workers=2, retries=5) as ex:
        fs = [ex.submit(always_die, 0)] + [ex.submit(time.sleep, 0.5) for _ in range(10)]
        errors = [f.exception(timeout=60) for f in fs]
        assert isinstance(errors[0], BrokenExecutor), errors[0]
        assert all(isinstance(e, BrokenExecutor) or e is None for e in errors), errors
        try:
            ex.submit(square, 2)
        except BrokenExecutor as e:
            assert "lost" in str(e), e
        else:
            raise AssertionError("a broken executor takes no tasks")
    """,
    )


def test_shutdown_cancels_what_did_not_start_and_a_failed_initializer_breaks_the_executor(tmp_path):
    run(
        tmp_path,
        """
    ex = MPIPoolExecutor(max_workers=2).bootup()
    fs = [ex.submit(time.sleep, 0.2) for _ in range(40)]
    time.sleep(0.5)
    ex.shutdown(wait=True, cancel_futures=True)
    done = sum(1 for f in fs if not f.cancelled())
    assert 2 <= done < 40 and all(f.done() for f in fs), done
    ex = MPIPoolExecutor(max_workers=2, initializer=bad_init)
    f = ex.submit(square, 2)
    assert isinstance(f.exception(timeout=60), BrokenExecutor)
    ex.shutdown()
    """,
    )


def test_progress_bar_counts_every_call_with_chunks(tmp_path):
    out = run(
        tmp_path,
        """
    with MPIPoolExecutor(max_workers=2) as ex:
        assert list(ex.map(square, range(120), chunksize=7, progress=True)) == [x * x for x in range(120)]
        class Bar:
            def __init__(self, total, unit):
                self.total, self.n = total, 0
            def update(self, n):
                self.n += n
            def close(self):
                print("bar", self.total, self.n)
        list(ex.starmap(pow, [(x, 2) for x in range(33)], chunksize=4, progress=Bar))
    """,
    )
    assert "120/120 tasks" in out.stderr, out.stderr
    assert "bar 33 33" in out.stdout


def test_a_task_over_its_time_limit_fails_with_a_timeout_and_the_worker_goes_on(tmp_path):
    run(
        tmp_path,
        """
    with MPIPoolExecutor(max_workers=1, task_timeout=0.5) as ex:
        slow, spin = ex.submit(time.sleep, 30), ex.submit(lambda_free_spin, 30)
        after = [ex.submit(square, i) for i in range(10)]
        for f in (slow, spin):
            e = f.exception(timeout=20)
            assert isinstance(e, TaskTimeout) and isinstance(e, TimeoutError) and "task_timeout" in str(e), e
        assert [f.result(timeout=20) for f in after] == [i * i for i in range(10)]
    try:
        MPIPoolExecutor(task_timeout=0)
    except ValueError as e:
        assert "task_timeout" in str(e)
    else:
        raise AssertionError("task_timeout=0 is refused")
    """,
    )
