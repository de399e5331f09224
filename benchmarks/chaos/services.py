"""The services a chaos trial's endpoints deploy (``mpiws serve --service``).

``ranks``: each rank sends a sequence-numbered message to every other rank
per round, receives theirs and checks each sender's numbers (one more than
the last: a repeat is a duplicate, a jump a loss), with an allreduce, a
broadcast from a rotating root and a barrier every few rounds; at least
``rounds`` rounds, and on while any rank has run less than ``seconds``
(agreed by an allreduce, so all ranks stop at the same round). The first MPI
error ends the rounds; the rank then receives from every rank the error
named what may still come (sent before it failed), and returns what it saw.
``futures``: the farm worker, after writing its pid (so a trial may kill it).
``slow``: a workflow step that takes a while.
"""

import itertools
import os
import re
import time

from mpiws import binding
from mpiws.futures import endpoints
from mpiws.workflow import step

TAG = 5


def _pidfile(params, name):
    d = (params or {}).get("piddir")
    if d:
        tmp = os.path.join(d, f".{name}.{os.getpid()}")
        with open(tmp, "w") as f:
            f.write(str(os.getpid()))
        os.replace(tmp, os.path.join(d, f"{name}.pid"))


def ranks(comm, params):
    from mpiws import MPI

    me, n = comm.rank, comm.size
    _pidfile(params, f"rank{me}")
    peers = [p for p in range(n) if p != me]
    expect = dict.fromkeys(peers, 0)  # the next sequence number from each peer
    received = dict.fromkeys(peers, 0)
    dups, lost, bad_collectives = 0, 0, 0
    failed_send = {}  # peer -> the sequence number of the first send to it that raised
    error = None
    op, rnd = None, 0
    until = time.monotonic() + params["seconds"]
    try:
        for rnd in itertools.count():
            for p in peers:
                op = ("send", p)
                try:
                    comm.send((me, rnd), dest=p, tag=TAG)
                except MPI.Exception:
                    failed_send[p] = rnd
                    raise
            for p in peers:
                op = ("recv", p)
                src, seq = comm.recv(source=p, tag=TAG)
                received[p] += 1
                if src != p or seq < expect[p]:
                    dups += 1
                    continue
                lost += seq - expect[p]
                expect[p] = seq + 1
            if rnd % 5 == 0:
                op = ("allreduce", None)
                if comm.allreduce(rnd) != rnd * n:
                    bad_collectives += 1
                root = (rnd // 5) % n
                op = ("bcast", root)
                if comm.bcast((root, rnd) if me == root else None, root=root) != (root, rnd):
                    bad_collectives += 1
                if rnd + 1 >= params["rounds"]:
                    op = ("allreduce", None)
                    if not comm.allreduce(time.monotonic() < until, op=MPI.LOR):
                        break
            if rnd % 7 == 0:
                op = ("barrier", None)
                comm.Barrier()
            time.sleep(params["pause"])
    except MPI.Exception as e:
        error = {
            "time": time.time(),
            "class": e.Get_error_class(),
            "message": e.Get_error_string(),
            "op": op[0],
            "peer": op[1],
            "round": rnd,
        }
    after_failed = []
    undelivered = None
    if error is not None:
        for named in sorted({int(r) for r in re.findall(r"rank (\d+)", error["message"])} - {me}):
            if named >= n:
                continue
            # What it sent before it failed may still be received (in order,
            # once); what its sender was told failed may not (chaos.py checks).
            try:
                while True:
                    src, seq = comm.recv(source=named, tag=TAG, timeout=0.5)
                    received[named] += 1
                    if src != named or seq < expect[named]:
                        dups += 1
                        continue
                    after_failed.append([named, seq])
                    expect[named] = seq + 1
            except MPI.Exception:
                pass
        # Sends that completed (eager) but never reached a failed rank are
        # reported by a flush, unless the rank was told that peer failed
        # (`Inbox::told`): flushed here, such reports go into the result.
        undelivered = []
        for _ in range(n):  # one report per peer
            try:
                binding.current().instance.flush(45.0)  # an upgrade may take the startup timeout (30 s)
                break
            except Exception as e:  # noqa: BLE001 - recorded
                undelivered.append(str(e)[:300])
    return {
        "rank": me,
        "rounds": rnd + 1 if error is None else rnd,
        "received": received,
        "next": expect,
        "duplicates": dups,
        "lost": lost,
        "bad_collectives": bad_collectives,
        "failed_send": failed_send,
        "error": error,
        "after_failed": after_failed,
        "undelivered": undelivered,
    }


def futures(comm, params):
    """The farm worker (``mpiws.futures.endpoints.worker``), its pid written first."""
    _pidfile({"piddir": os.environ.get("CHAOS_PIDDIR")}, f"worker{os.getpid()}")
    return endpoints.worker(comm, params)


@step
def slow(x, seconds=1.0):
    time.sleep(seconds)
    return x * 2 + 1
