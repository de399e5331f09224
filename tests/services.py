"""Services deployed on the tests' in-process endpoint."""

import os
import random
import time

import numpy as np
import numpy.random  # noqa: F401 - imported by the fork server, so its children reseed it

from mpiws import MPI


def recv_object(comm, params):
    """Receive one pickled object from params['source'] and return it."""
    return comm.recv(source=params.get("source", MPI.ANY_SOURCE), tag=params.get("tag", MPI.ANY_TAG))


def recv_repr(comm, params):
    """Receive one pickled object from anyone and return its repr."""
    return repr(comm.recv(source=MPI.ANY_SOURCE))


def recv_raw(comm, params):
    """Receive raw bytes into a buffer; return them as text with the status."""
    buf = bytearray(params["size"])
    st = MPI.Status()
    comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG, status=st)
    return {"data": bytes(buf[: st.Get_count()]).decode(), "source": st.source, "tag": st.tag}


def recv_many(comm, params):
    """Receive params['count'] objects from anyone, in order."""
    return [comm.recv(source=MPI.ANY_SOURCE) for _ in range(params["count"])]


def exchange(comm, params):
    """Every rank sends its (domain marker, rank) to every other; returns what arrived."""
    me, n = comm.Get_rank(), comm.Get_size()
    reqs = [comm.isend((params["marker"], me), dest=r, tag=5) for r in range(n) if r != me]
    got = sorted(tuple(comm.recv(source=MPI.ANY_SOURCE, tag=5)) for _ in range(n - 1))
    MPI.Request.waitall(reqs)
    return got


def block(comm, params):
    """Wait for a message that never comes (until cancelled)."""
    comm.recv(source=MPI.ANY_SOURCE, tag=99)


def block_on_self(comm, params):
    """Wait for a message from itself that never comes (until cancelled): a
    receive is posted, but none for the other ranks."""
    comm.recv(source=comm.rank, tag=99)


def hold_gil(comm, params):
    """Compute for hours inside one C call, never letting go of the GIL."""
    return sum(range(10**14))


def crash(comm, params):
    """Rank 1 dies at once (abort: no exception, no report); the others wait for it."""
    if comm.Get_rank() == 1:
        os.abort()
    return comm.recv(source=1)


def allocate(comm, params):
    """Hold params['bytes'] bytes of memory."""
    return len(bytearray(params["bytes"]))


def hold(comm, params):
    """Hold params['bytes'] bytes resident (written, not merely reserved) for params['seconds']."""
    buf = bytearray(b"\x01") * params["bytes"]
    time.sleep(params["seconds"])
    return len(buf)


def origin(comm, params):
    """Where this instance runs and what its random generators draw first."""
    return {
        "pid": os.getpid(),
        "parent": os.getppid(),
        "numpy": int(np.random.randint(1 << 30)),
        "random": random.random(),
        "rank": comm.Get_rank(),
    }


def fail(comm, params):
    raise ValueError("this service always fails")


def array_sum(comm, params):
    a = np.arange(params["n"], dtype="d")
    return float(a.sum()) + comm.Get_rank()


def whereami(comm):
    """This rank's endpoint URL, network namespace and processor name."""
    c = comm._core
    return {
        "rank": comm.Get_rank(),
        "url": c.endpoints[c.group[c.rank]],
        "netns": os.readlink("/proc/self/ns/net"),
        "host": MPI.Get_processor_name(),
    }


def multihost(comm, params):
    """Used by test_multihost: report where this rank runs, pass identities and
    a buffer of params['payload'] int32 values (all rank+1) round a ring, and
    sendrecv with every other rank; return what arrived."""
    me, n = comm.Get_rank(), comm.Get_size()
    ident = whereami(comm)
    right, left = (me + 1) % n, (me - 1) % n
    # ring of pickled objects
    req = comm.isend(ident, dest=right, tag=1)
    ring_obj = comm.recv(source=left, tag=1)
    req.wait()
    # ring of raw buffers
    out = np.full(params["payload"], me + 1, dtype="i4")
    got = np.zeros(params["payload"] + 1, dtype="i4")
    st = MPI.Status()
    reqs = [comm.Isend(out, dest=right, tag=2)]
    comm.Recv(got, source=left, tag=2, status=st)
    MPI.Request.Waitall(reqs)
    ring_buf = {
        "count": st.Get_count(MPI.INT),
        "source": st.source,
        "values": sorted(set(got[: params["payload"]].tolist())),
        "sum": int(got.sum()),
    }
    # sendrecv between all pairs
    pairs = {}
    for step in range(1, n):
        dest, src = (me + step) % n, (me - step) % n
        pairs[str(src)] = comm.sendrecv(
            {"from": me, "to": dest, "netns": ident["netns"], "url": ident["url"]},
            dest=dest,
            sendtag=100 + step,
            source=src,
            recvtag=100 + step,
        )
    # collectives, and a synchronous send (its completion waits for the match)
    total = np.zeros(1024, dtype="i8")
    comm.Allreduce(np.full(1024, me + 1, dtype="i8"), total, op=MPI.SUM)
    colls = {
        "allreduce": comm.allreduce(me + 1),
        "Allreduce": sorted(set(total.tolist())),
        "bcast": comm.bcast(ident["url"] if me == n - 1 else None, root=n - 1),
        "allgather": comm.allgather(me),
        "alltoall": comm.alltoall([10 * me + d for d in range(n)]),
    }
    comm.Barrier()
    req = comm.irecv(source=left, tag=3)
    comm.ssend(me, dest=right, tag=3)
    colls["ssend"] = req.wait()
    return {"me": ident, "ring_obj": ring_obj, "ring_buf": ring_buf, "pairs": pairs, "colls": colls}


def check_multihost(results, urls):
    """Assert what ``multihost`` returned on each rank ({rank: result}) for a
    domain over endpoints ``urls``; returns the ranks' identities."""
    n = len(urls)
    assert sorted(results) == list(range(n)), sorted(results)
    me = [results[r]["me"] for r in range(n)]
    assert [m["rank"] for m in me] == list(range(n))
    assert [m["url"] for m in me] == urls
    for r in range(n):
        left = (r - 1) % n
        got = results[r]
        # ring of objects: the left neighbour's identity, sent from its host
        assert got["ring_obj"] == me[left], (r, got["ring_obj"])
        # ring of buffers: int32 values, all left + 1, from the left neighbour
        count = got["ring_buf"]["count"]
        assert got["ring_buf"] == {"count": count, "source": left, "values": [left + 1], "sum": count * (left + 1)}
        # sendrecv with every other rank
        assert sorted(got["pairs"]) == sorted(str(s) for s in range(n) if s != r)
        for s, msg in got["pairs"].items():
            s = int(s)
            assert msg == {"from": s, "to": r, "netns": me[s]["netns"], "url": urls[s]}, (r, s, msg)
        assert got["colls"] == {
            "allreduce": n * (n + 1) // 2,
            "Allreduce": [n * (n + 1) // 2],
            "bcast": urls[-1],
            "allgather": list(range(n)),
            "alltoall": [10 * s + r for s in range(n)],
            "ssend": left,
        }, (r, got["colls"])
    return me


ALL = {
    f.__name__: f
    for f in (recv_object, recv_repr, recv_raw, recv_many, exchange, block, block_on_self, fail, array_sum)
}
