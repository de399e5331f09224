"""The rank the SOAP benchmark messages: it receives `count` raw messages of at most `size` bytes."""

from mpiws import MPI


def sink(comm, params):
    buf = bytearray(params["size"])
    for _ in range(params["count"]):
        comm.Recv(buf, source=MPI.ANY_SOURCE, tag=MPI.ANY_TAG)
    return params["count"]
