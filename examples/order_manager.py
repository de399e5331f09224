"""An order manager: rank 0 routes orders to the traders (ranks 1..N-1),
each order with a time limit.

Some orders are slow (deterministic, by order id): an illiquid order takes
long at every trader, and each trader leaves a few orders waiting before it
starts them. The manager's receive for a fill carries ``timeout=``; its
handlers decide what happens:

  completed  -> the order is filled
  timed_out  -> the receive was withdrawn (mpiws does that); the handler
                cancels the order at the trader (dropped if not started yet)
                and re-routes it to another trader, or, after two attempts,
                reports it expired

An order the trader had already started is filled anyway, late, while the
manager waits on that trader for other orders. Every fill's tag names its
order and attempt, so a late fill is never taken for the answer to another
order; the manager collects the late fills at the end and checks its books
against what the traders report they did.

Run:  mpiws run -n 4 examples/order_manager.py [--orders 24]
"""

import argparse
import threading
import time

from mpiws import MPI

parser = argparse.ArgumentParser()
parser.add_argument("--orders", type=int, default=24)
args = parser.parse_args()

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
if size < 2 or args.orders < 1:
    raise SystemExit("needs a manager and at least one trader (2 ranks), and an order")

ORDER, CANCEL, REPORT = 1, 2, 3
LIMIT = 0.4  # seconds a trader has to fill an order
SLOW, FAST = 0.6, 0.01  # SLOW - LIMIT: time for a cancel to reach a waiting order
ATTEMPTS = 2
TRADERS = list(range(1, size))


def fill_tag(oid, attempt):
    """The tag of a fill: one per order and attempt."""
    return 100 + oid * ATTEMPTS + attempt


def trader_for(oid, attempt):
    return TRADERS[(oid + attempt) % len(TRADERS)]


def timing(oid, trader):
    """(seconds the order waits before the trader starts it, seconds it then takes)."""
    if oid % 8 == 7:
        return 0, SLOW  # illiquid: started at once, filled late everywhere
    if (oid + trader) % 5 == 0:
        return SLOW, FAST  # this trader leaves it waiting: a cancel catches it
    return 0, FAST


def quantity(oid):
    return 10 * (1 + oid % 5)


def trade():
    """A trader: works on each order in a thread of its own; an order whose
    cancel arrived before the trader started it is dropped."""
    cancelled, executed, skipped = set(), [], []
    comm.on_message(lambda r: cancelled.add(r.value), source=0, tag=CANCEL)

    def work(oid, attempt, qty):
        wait, busy = timing(oid, rank)
        time.sleep(wait)
        if (oid, attempt) in cancelled:
            skipped.append((oid, attempt))
            return
        time.sleep(busy)  # on the market now: a cancel comes too late
        comm.send((oid, attempt, rank, qty), dest=0, tag=fill_tag(oid, attempt))
        executed.append((oid, attempt))

    threads = []
    while (order := comm.recv(source=0, tag=ORDER)) is not None:  # None: the books are closing
        threads.append(threading.Thread(target=work, args=order))
        threads[-1].start()
    for th in threads:
        th.join()
    comm.off_message(source=0, tag=CANCEL)
    comm.send((executed, skipped), dest=0, tag=REPORT)


# ---- the manager: its books are kept by the handlers, which run one at a time
# on the handler thread (no lock needed); the main thread reads them once settled.
fills, expired, timed_out = {}, set(), []  # fills: order -> (order, attempt, trader, qty)
rerouted = 0
settled = threading.Event()


def send_order(oid, attempt):
    t = trader_for(oid, attempt)
    comm.irecv(
        source=t,
        tag=fill_tag(oid, attempt),
        timeout=LIMIT,
        schedule=MPI.Schedule(
            completed=lambda r: on_fill(r.request.wait(), oid, attempt, t),
            timed_out=lambda r: on_timeout(oid, attempt, t),
        ),
    )
    comm.isend((oid, attempt, quantity(oid)), dest=t, tag=ORDER)


def on_fill(fill, oid, attempt, t):
    assert fill == (oid, attempt, t, quantity(oid)), (fill, oid, attempt, t)  # what the tag promised
    fills[oid] = fill
    check_settled()


def on_timeout(oid, attempt, t):
    global rerouted
    comm.isend((oid, attempt), dest=t, tag=CANCEL)  # the stale order: cancelled at the trader too
    timed_out.append((oid, attempt))
    if attempt + 1 < ATTEMPTS:
        rerouted += 1
        send_order(oid, attempt + 1)
        what = f"re-routed to trader {trader_for(oid, attempt + 1)}"
    else:
        expired.add(oid)
        what = "expired"
    print(f"order {oid} (attempt {attempt}): no fill from trader {t} within {LIMIT} s: cancelled, {what}", flush=True)
    check_settled()


def check_settled():
    if len(fills) + len(expired) == args.orders:
        settled.set()


def manage():
    for oid in range(args.orders):
        send_order(oid, 0)
    assert settled.wait(120), "orders left unsettled"

    # Close the books. The fills sent for attempts that had timed out wait in
    # the mailbox, each under its own tag: collect them, they answer nothing.
    for t in TRADERS:
        comm.send(None, dest=t, tag=ORDER)
    reports = {t: comm.recv(source=t, tag=REPORT) for t in TRADERS}
    executed = {(oid, a): t for t, (done, _) in reports.items() for oid, a in done}
    skipped = [(oid, a) for _, skip in reports.values() for oid, a in skip]
    late = sorted(k for k in executed if fills.get(k[0], (None, None))[:2] != k)
    for oid, a in late:
        t = executed[oid, a]
        assert comm.recv(source=t, tag=fill_tag(oid, a), timeout=30) == (oid, a, t, quantity(oid))
        print(f"late fill of order {oid} (attempt {a}) from trader {t}: ignored", flush=True)

    # The books must agree with the traders'.
    assert not fills.keys() & expired and len(fills) + len(expired) == args.orders
    assert len(timed_out) == rerouted + len(expired)
    assert all(executed.get(f[:2]) == f[2] for f in fills.values())  # each fill taken was sent for that attempt
    assert sorted(late + skipped) == sorted(timed_out)  # a timed-out attempt was dropped or filled late, never taken
    print(
        f"orders: {args.orders}, filled: {len(fills)} ({sum(f[1] > 0 for f in fills.values())} after re-routing), "
        f"expired: {len(expired)} {sorted(expired)}, filled quantity: {sum(f[3] for f in fills.values())}"
    )
    print(
        f"timed out: {len(timed_out)} attempts = {rerouted} re-routed + {len(expired)} expired; "
        f"of these, cancelled in time: {len(skipped)}, filled late (ignored): {len(late)}"
    )
    print("books consistent")


trade() if rank else manage()
