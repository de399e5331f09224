"""Services deployed on the tests' in-process endpoint."""

import numpy as np

from mpiws import MPI


def recv_object(comm, params):
    """Receive one pickled object from params['source'] and return it."""
    return comm.recv(source=params.get("source", MPI.ANY_SOURCE), tag=params.get("tag", MPI.ANY_TAG))


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


def fail(comm, params):
    raise ValueError("this service always fails")


def array_sum(comm, params):
    a = np.arange(params["n"], dtype="d")
    return float(a.sum()) + comm.Get_rank()


ALL = {f.__name__: f for f in (recv_object, recv_raw, recv_many, exchange, block, fail, array_sum)}
