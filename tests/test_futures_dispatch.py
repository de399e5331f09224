"""The task farm's bookkeeping (mpiws.futures.dispatch), without processes."""

import pytest

from mpiws.futures.dispatch import Dispatcher, Item


def items(n, start=0):
    return [Item(f"future{i}", f"task{i}") for i in range(start, start + n)]


def farm(workers=2, **kw):
    d = Dispatcher(**kw)
    for k in range(workers):
        d.join(k, now=0.0)
    return d


def test_the_first_batches_are_single_tasks_until_a_task_time_is_measured():
    d = farm()
    assert d.batch_size(queued=100) == 1


def test_a_batch_holds_about_one_round_trip_of_work_but_no_more_than_a_fair_share():
    d = farm(min_target=0.0)
    d.sent(0, items(1), now=0.0)
    d.replied(0, now=0.011, count=1, compute=0.001)  # 1 ms of work, 10 ms on the way
    assert d.task_time == pytest.approx(0.001)
    assert d.round_trip == pytest.approx(0.010)
    assert d.batch_size(queued=1000) == 10
    assert d.batch_size(queued=6) == 3  # two workers: half each
    assert d.batch_size(queued=6, free=4) == 1  # six workers could share them
    d.max_batch = 4
    assert d.batch_size(queued=1000) == 4


def test_tiny_tasks_fill_batches_up_to_max_batch():
    d = farm(max_batch=64)
    d.sent(0, items(1), now=0.0)
    d.replied(0, now=0.01, count=1, compute=1e-7)
    assert d.batch_size(queued=10_000) == 64


def test_prefetch_gives_each_worker_a_second_batch_only_when_work_is_plentiful():
    d = farm(depth=2)
    picks = []
    for _ in range(4):
        k = d.pick(queued=100)
        d.sent(k, items(1), now=0.0)
        picks.append(k)
    assert sorted(picks) == [0, 0, 1, 1]
    assert d.pick(queued=100) is None  # both hold two batches
    d.replied(0, now=0.1, count=1, compute=0.05)
    assert d.pick(queued=1) is None  # a short queue goes to idle workers only
    assert d.pick(queued=100) == 0


def test_least_loaded_first_and_ties_take_turns():
    d = farm(workers=3, depth=4)
    order = []
    for _ in range(6):
        k = d.pick(queued=100)
        d.sent(k, items(1), now=0.0)
        order.append(k)
    assert order == [0, 1, 2, 0, 1, 2]


def test_a_reply_may_cover_part_of_a_batch_or_run_into_the_next():
    d = farm(workers=1)
    first, second = items(3), items(2, start=3)
    d.sent(0, first, now=0.0)
    d.sent(0, second, now=0.0)
    assert d.replied(0, now=1.0, count=2, compute=0.2) == first[:2]
    assert d.replied(0, now=1.0, count=2, compute=0.2) == [first[2], second[0]]
    assert d.workers[0].outstanding == 1
    with pytest.raises(ValueError, match="replied for 2 tasks, it holds 1"):
        d.replied(0, now=1.0, count=2, compute=0.0)
    assert d.replied(0, now=1.0, count=1, compute=0.1) == second[1:]
    assert d.idle() and d.workers[0].tasks == 5


def test_a_lost_workers_tasks_are_redone_until_retries_run_out():
    d = farm(workers=3, retries=1)
    batch = items(2)
    d.sent(0, batch, now=0.0)
    redo, fail = d.lose(0, "gone")
    assert redo == batch and fail == []
    d.sent(1, redo, now=0.0)  # the second try
    redo, fail = d.lose(1, "gone too")
    assert redo == [] and fail == batch
    assert [w.key for w in d.live()] == [2]
    assert d.lose(1, "again") == ([], [])  # losing twice changes nothing
    with pytest.raises(ValueError, match="is lost"):
        d.replied(1, now=0.0, count=1, compute=0.0)
    with pytest.raises(ValueError, match="lost"):
        d.join(1, now=0.0)


def test_released_workers_get_no_work_until_they_join_again_and_keep_their_counts():
    d = farm(workers=2)
    d.sent(0, items(1), now=0.0)
    with pytest.raises(ValueError, match="in flight"):
        d.release(0)
    d.replied(0, now=0.5, count=1, compute=0.1)
    d.release(0)
    assert [d.pick(queued=100) for _ in range(1)] == [1]
    d.join(0, now=1.0)
    assert d.workers[0].tasks == 1
    stats = {s["worker"]: s for s in d.stats(now=2.0)}
    assert stats[0]["tasks"] == 1 and stats[0]["tasks_per_second"] == pytest.approx(0.5)
    assert stats[1]["tasks"] == 0 and stats[1]["lost"] is None


def test_bad_settings_are_refused():
    for kw in ({"depth": 0}, {"max_batch": 0}, {"retries": -1}):
        with pytest.raises(ValueError):
            Dispatcher(**kw)
