"""The soak endpoint's services (``mpiws serve --service``)."""


def rss_kib():
    """Resident memory but shared memory (VmRSS - RssShmem): the same-host
    channel's rings are shared memory of a fixed size (two per pair,
    ``MPIWS_LOCAL_RING_KIB``), whose pages count as they are first touched,
    so a long stream of small messages grows VmRSS until the rings have
    turned once; what a leak would grow is the private part."""
    kib = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssShmem"):
                kib[key] = int(value.split()[0])
    return kib.get("VmRSS", 0) - kib.get("RssShmem", 0)


def one(comm, params):
    """A domain that only starts and ends: a barrier, then each rank's number."""
    comm.Barrier()
    return comm.rank


def pair(comm, params):
    """Rank 0 sends ``messages`` sequence-numbered messages to rank 1, which
    checks their order; every ``every`` messages both sample their resident
    memory and meet (a small exchange, so the sender never runs far ahead)."""
    n, every = params["messages"], params["every"]
    peer = 1 - comm.rank
    samples, wrong = [], 0
    for i in range(n):
        if comm.rank == 0:
            comm.send(i, dest=1, tag=1)
        elif comm.recv(source=0, tag=1) != i:
            wrong += 1
        if (i + 1) % every == 0:
            comm.sendrecv(i, dest=peer, sendtag=2, source=peer, recvtag=2)
            samples.append([i + 1, rss_kib()])
    return {"samples": samples, "wrong": wrong}
