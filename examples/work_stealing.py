"""Random work stealing, with completion, time-out and failure handlers.

Every rank owns a pool of tasks (rank 0 half of them, the others the rest)
and works through it; a rank whose pool has run dry asks a randomly chosen
peer for work. The peer lends it half of its untouched tasks, and the thief
sends the results back to the owner. What happens next is decided by the
handlers of each non-blocking request (an MPI.Schedule):

  an answer arrived          -> work on the loan
  no answer within 1 s       -> ask another rank (a late answer is still taken: it has its own tag)
  the peer is gone           -> forget it, ask another rank
  a loan's thief is gone     -> the loan goes back into the owner's pool
  an owner died unreported   -> rank 0 takes its whole pool over

An owner whose pool is complete reports it to rank 0, which checks that
every task was recorded exactly once, against a serial computation.

Run:  mpiws run -n 4 examples/work_stealing.py
      mpiws run -n 4 -k examples/work_stealing.py --kill 2   # rank 2 dies mid-way
(-k: the launcher lets the survivors run on; it still exits 1, naming rank 2.)
"""

import argparse
import itertools
import os
import queue
import random
import threading
import time
from collections import deque

from mpiws import MPI

parser = argparse.ArgumentParser()
parser.add_argument("--tasks", type=int, default=200)
parser.add_argument("--kill", type=int, metavar="RANK", help="RANK exits abruptly midway (run with mpiws run -k)")
args = parser.parse_args()

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
if args.kill is not None and not 0 < args.kill < size:
    raise SystemExit("--kill takes a rank from 1 to size-1 (rank 0 collects the results)")

STEAL, REPORT, STOP, DONE, BYE = 1, 2, 3, 4, 5
LOOT, RESULT = 1_000, 1_000_000  # + the thief's ask number / the owner's loan number: replies never mix
ASK_TIMEOUT = 1.0
WIDTH = 1000


def work(t):
    """A task: the sum of the primes in [t*WIDTH, (t+1)*WIDTH), by trial division."""
    return sum(n for n in range(max(2, t * WIDTH), (t + 1) * WIDTH) if all(n % d for d in range(2, int(n**0.5) + 1)))


def owner(t):
    return 0 if t < args.tasks // 2 or size == 1 else 1 + t % (size - 1)


def say(msg):
    print(f"rank {rank}: {msg}", flush=True)


def why(error):
    return "gone" if error.Get_error_class() == MPI.ERR_PROC_FAILED else error.Get_error_string()


lock = threading.Lock()  # the handler thread and the main thread share the pool
pending = deque(t for t in range(args.tasks) if owner(t) == rank)  # own tasks nobody started
owned = len(pending)  # grows on rank 0 when it takes over a dead rank's pool
results = {}  # own task -> value, computed here or returned by a thief
loans = {}  # loan number -> (thief, tasks)
loan_numbers, ask_numbers = itertools.count(1), itertools.count()
dead, reports, taken_over = set(), {}, []  # reports, taken_over: rank 0's books
inbox = queue.Queue()  # from the handlers to the main thread: (owner, loan, tasks), None: stop, or an error
stop = threading.Event()
rng = random.Random(rank)
computed = stolen = 0
reported = False
die_after = min(10, owned // 2) if rank == args.kill else None


def check():
    """Called under the lock after every change: report a complete pool; on
    rank 0, stop once every pool is accounted for."""
    global reported
    if pending or loans or len(results) < owned:
        return
    if rank != 0 and not reported:
        reported = True
        comm.isend(dict(results), dest=0, tag=REPORT)
    elif rank == 0 and len(reports) + len(taken_over) == size - 1 and not stop.is_set():
        stop.set()
        inbox.put(None)


# ---- the owner's side: lending ------------------------------------------------


def on_steal(r):
    """A peer asks for work: lend it half of the untouched pool."""
    thief, reply_tag = r.source, r.value
    with lock:
        tasks = [pending.pop() for _ in range((len(pending) + 1) // 2)]  # from the end: the owner takes the front
        loan = next(loan_numbers)
        if tasks:
            loans[loan] = (thief, tasks)
    if tasks:  # the loan's results; if the thief dies instead, the tasks come back
        comm.irecv(
            source=thief,
            tag=RESULT + loan,
            schedule=MPI.Schedule(
                completed=lambda x: returned(loan, x.request.wait()), failed=lambda x: thief_lost(loan)
            ),
        )
    comm.isend((loan, tasks), dest=thief, tag=reply_tag)


def returned(loan, values):
    with lock:
        loans.pop(loan)
        results.update(values)
        check()


def thief_lost(loan):
    with lock:
        thief, tasks = loans.pop(loan)
        pending.extend(tasks)
    dead.add(thief)
    say(f"rank {thief} died holding {len(tasks)} of my tasks: they are back in my pool")


# ---- the thief's side: asking -------------------------------------------------


def ask(avoid=None):
    """Ask a random live peer for work; its handlers carry on from there."""
    peers = [p for p in range(size) if p != rank and p not in dead]
    if not peers:
        inbox.put((None, 0, []))
        return
    v = rng.choice([p for p in peers if p != avoid] or peers)
    tag = LOOT + next(ask_numbers)  # the answer's tag: one to this ask only
    comm.irecv(
        source=v,
        tag=tag,
        timeout=ASK_TIMEOUT,
        schedule=MPI.Schedule(
            completed=lambda r: inbox.put((v, *r.request.wait())),
            timed_out=lambda r: no_answer(v, tag),
            failed=lambda r: gone(v, r.error),
        ),
    )
    comm.isend(tag, dest=v, tag=STEAL)


def no_answer(v, tag):
    if stop.is_set():
        return
    say(f"no answer from rank {v} within {ASK_TIMEOUT} s: asking another rank")
    # The ask was withdrawn, but an answer may still come, and it may be a
    # loan its owner waits on: take it when it comes, by its own tag.
    comm.irecv(source=v, tag=tag, schedule=MPI.Schedule(completed=lambda r: inbox.put((v, *r.request.wait()))))
    ask(avoid=v)


def gone(v, error):
    if stop.is_set():
        return
    if v not in dead:
        dead.add(v)
        say(f"asked rank {v} for work: {why(error)}; asking another rank")
    ask(avoid=v)


# ---- rank 0's books -------------------------------------------------------------


def on_report(r, pool):
    with lock:
        reports[r] = pool
        check()


def take_over(r, error):
    """Rank r's report will never come: its pool (and every result it held) is lost; redo it here."""
    global owned
    lost = [t for t in range(args.tasks) if owner(t) == r]
    with lock:
        dead.add(r)
        taken_over.append(r)
        pending.extend(lost)
        owned += len(lost)
        check()
    say(f"rank {r} is {why(error)} before reporting: its {len(lost)} tasks go into my pool")


comm.on_message(on_steal, tag=STEAL)
if rank == 0:
    for r in range(1, size):
        comm.irecv(
            source=r,
            tag=REPORT,
            schedule=MPI.Schedule(
                completed=lambda x, r=r: on_report(r, x.request.wait()), failed=lambda x, r=r: take_over(r, x.error)
            ),
        )
else:  # rank 0 says when to stop; if it is gone, nobody ever will
    comm.irecv(
        source=0,
        tag=STOP,
        schedule=MPI.Schedule(completed=lambda r: (stop.set(), inbox.put(None)), failed=lambda r: inbox.put(r.error)),
    )
with lock:
    check()  # an empty pool is complete at once
comm.Barrier()  # all start together: nobody's pool is raided before its owner is at work


def compute(t):
    global computed
    if computed == die_after:
        say(f"exiting abruptly after {computed} tasks (os._exit)")
        os._exit(1)
    computed += 1
    return work(t)


# ---- the main thread: work, steal when idle ----------------------------------------

while not stop.is_set():
    with lock:
        t = pending.popleft() if pending else None
    if t is not None:
        value = compute(t)
        with lock:
            results[t] = value
            check()
        continue
    if inbox.empty():
        ask()
    item = inbox.get()
    if item is None:
        break
    if isinstance(item, MPI.Exception):
        raise item
    victim, loan, tasks = item
    if not tasks:
        time.sleep(0.02)  # nothing to spare there: do not flood the peers
        continue
    stolen += len(tasks)
    values = {t: compute(t) for t in tasks}
    comm.isend(
        values,
        dest=victim,
        tag=RESULT + loan,
        schedule=MPI.Schedule(
            failed=lambda r, v=victim: say(f"rank {v} is gone: results of its loan dropped (rank 0 redoes its pool)")
        ),
    )

# Every pool is accounted for. Stop in two steps, so that no rank's end looks
# like a failure to another still at work: rank 0 says STOP, each survivor
# answers DONE with its counts, and only then does rank 0 say BYE.
if rank == 0:
    survivors = [r for r in range(1, size) if r not in dead]
    for r in survivors:
        comm.isend(None, dest=r, tag=STOP)
    counts = [(0, computed, stolen)]
    for r in list(survivors):
        try:
            counts.append(comm.recv(source=r, tag=DONE))
        except MPI.Exception as e:  # it died after reporting: nothing of its pool is lost
            survivors.remove(r)
            say(f"rank {r} is {why(e)}, after reporting")
    for r in survivors:
        comm.send(None, dest=r, tag=BYE)
else:
    comm.send((rank, computed, stolen), dest=0, tag=DONE)
    comm.recv(source=0, tag=BYE)
comm.off_message(tag=STEAL)

if rank == 0:
    merged = dict(results)
    for pool in reports.values():
        assert not merged.keys() & pool.keys(), "a task recorded twice"
        merged.update(pool)
    assert sorted(merged) == list(range(args.tasks)), "tasks missing"
    # The serial check, by another method: a sieve.
    limit = args.tasks * WIDTH
    sieve = bytearray([1]) * limit
    sieve[:2] = b"\0\0"
    for i in range(2, int(limit**0.5) + 1):
        if sieve[i]:
            sieve[i * i :: i] = bytearray(len(range(i * i, limit, i)))
    serial = {t: sum(n for n in range(t * WIDTH, (t + 1) * WIDTH) if sieve[n]) for t in range(args.tasks)}
    assert merged == serial, "results differ from the serial computation"
    for r, n, s in counts:
        print(f"rank {r} computed {n} tasks ({s} stolen)")
    total = sum(n for _, n, _ in counts)
    redone = sum(owner(t) in taken_over for t in range(args.tasks))
    lost = f"; lost with rank(s) {taken_over} and redone: {redone}" if taken_over else ""
    by = " by the survivors" if len(counts) < size else ""
    print(f"{args.tasks} tasks recorded exactly once, {total} computed{by}{lost}")
    print(f"sum of primes below {limit} = {sum(merged.values())}: matches the serial computation")
