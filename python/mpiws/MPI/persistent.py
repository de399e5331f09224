"""``Prequest``: persistent requests, point-to-point (``Send_init``,
``Recv_init``, ...) and collective (``Bcast_init``, ... in MPI/collectives.py).
A persistent request keeps how to start its operation;
``Start`` posts it once more (as ``Isend``/``Irecv`` would), and a wait or
test completes that round and leaves the request inactive, not freed: it
can be started again until ``Free``."""

from .exception import ERR_REQUEST, Exception as MPIException
from .request import Request


class Prequest(Request):
    """
    Persistent request handler.
    """

    __slots__ = ()

    @classmethod
    def _persistent(cls, start):
        """A new inactive persistent request; ``start()`` posts one round and returns its request."""
        p = cls()
        p._start = start
        return p

    def Start(self):
        """Start(self)

        Initiate a communication with a persistent request.
        """
        if self._start is None:
            raise MPIException(ERR_REQUEST, "Start on a null or freed persistent request")
        if self._r is not None:
            raise MPIException(ERR_REQUEST, "Start on a persistent request that is still active")
        round_ = self._start()
        self._r, self._kind, self._buf, self._limit, self._deadline = (
            round_._r,
            round_._kind,
            round_._buf,
            round_._limit,
            round_._deadline,
        )
        self._info = round_._info

    start = Start

    @staticmethod
    def Startall(requests):
        """Startall(requests)

        Start a collection of persistent requests.
        """
        for r in requests:
            r.Start()

    startall = Startall

    # ---- partitioned (MPI/partitioned.py) -----------------------------------

    def _partitioned(self):
        if not hasattr(self._start, "ready"):
            raise MPIException(ERR_REQUEST, "not a partitioned request")
        return self._start

    def Pready(self, partition):
        """Pready(self, partition)

        Mark a given partition as ready.
        """
        self._partitioned().ready(partition)

    def Pready_range(self, partition_low, partition_high):
        """Pready_range(self, partition_low, partition_high)

        Mark a range of partitions as ready.
        """
        for i in range(partition_low, partition_high + 1):
            self._partitioned().ready(i)

    def Pready_list(self, partitions):
        """Pready_list(self, partitions)

        Mark a sequence of partitions as ready.
        """
        for i in partitions:
            self._partitioned().ready(i)

    def Parrived(self, partition):
        """Parrived(self, partition)

        Test partial completion of a partitioned receive operation.
        """
        return self._partitioned().arrived(partition)
