"""The service the delivery tests run through a fault-injecting proxy: rank 0
sends ``count`` messages of mixed sizes to rank 1 (objects, buffers into a
posted receive, and every 50th a synchronous send), rank 1 checks that each
arrives once, in order, intact. Both then check that nothing more came."""

import numpy as np

from mpiws import MPI

BIG = 1 << 20


def size_of(rng):
    r = rng.random()
    if r < 0.75:
        return int(rng.integers(8, 1024))  # room for the message number
    if r < 0.97:
        return int(rng.integers(1024, 48 * 1024))
    return int(rng.integers(48 * 1024, BIG))


def exchange(comm, params):
    count, seed = params["count"], params.get("seed", 1)
    rng = np.random.default_rng(seed)
    buf = np.empty(BIG, dtype=np.uint8)
    status = MPI.Status()
    for i in range(count):
        n = size_of(rng)
        as_buffer, sync = i % 3 == 0, i % 50 == 0
        if comm.rank == 0:
            data = np.full(n, i % 251, dtype=np.uint8)
            data[:8] = np.frombuffer(np.int64(i).tobytes(), dtype=np.uint8)
            if as_buffer:
                (comm.Ssend if sync else comm.Send)(data, dest=1, tag=1)
            else:
                (comm.ssend if sync else comm.send)((i, data), dest=1, tag=2)
        else:
            if as_buffer:
                comm.Recv(buf, source=0, tag=1, status=status)
                got = buf[: status.Get_count(MPI.BYTE)]
            else:
                j, got = comm.recv(source=0, tag=2)
                assert j == i, f"message {j} arrived as number {i}"
            assert got.size == n, f"message {i}: {got.size} bytes, sent {n}"
            assert int(np.frombuffer(got[:8].tobytes(), dtype=np.int64)[0]) == i, f"message {i} out of order"
            assert (got[8:] == i % 251).all(), f"message {i} corrupted"
        if i % 5000 == 0:
            comm.Barrier()  # both directions carry traffic now and then
    comm.Barrier()
    extra = comm.Iprobe(source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    return {"messages": count, "extra": bool(extra)}
