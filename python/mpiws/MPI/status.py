"""``MPI.Status``: source, tag, error and size of a received message."""

from array import array

from .exception import SUCCESS

ANY_SOURCE = -2
ANY_TAG = -1
UNDEFINED = -32766

# Field positions in a status's memory (MPICH's MPI_Status), also what
# Fortran sees (MPI_F_SOURCE & co.).
_LO, _HI, _SOURCE, _TAG, _ERROR = range(5)
F_SOURCE, F_TAG, F_ERROR, F_STATUS_SIZE = _SOURCE, _TAG, _ERROR, 5


def _count_words(nbytes, cancelled):
    """The count's low and high C ints (the high one's bit 0: cancelled), as MPICH lays them out."""
    lo = nbytes & 0xFFFFFFFF
    return (lo - (1 << 32) if lo >= 1 << 31 else lo), ((nbytes >> 32) << 1) | bool(cancelled)


class Status:
    """
    Status object.

    The fields live in five C ints laid out as MPICH's ``MPI_Status``
    (count low bits, count high bits and cancelled flag, source, tag,
    error), so ``tomemory()`` is a writable view of them, as in mpi4py.
    """

    __slots__ = ("_mem", "__weakref__")

    def __init__(self, status=None):
        if status is None:
            self._mem = array("i", [0, 0, ANY_SOURCE, ANY_TAG, SUCCESS])
        elif isinstance(status, Status):
            self._mem = array("i", status._mem)
        else:
            raise TypeError(f"expected a Status, got {type(status).__name__}")

    def _set(self, source, tag, nbytes, cancelled=False, error=SUCCESS):
        # All five at once (every receive fills one), not through the setters below.
        m = self._mem
        m[_LO], m[_HI] = _count_words(nbytes, cancelled)
        m[_SOURCE], m[_TAG], m[_ERROR] = source, tag, error

    source = property(lambda self: self._mem[_SOURCE], lambda self, v: self._mem.__setitem__(_SOURCE, v))
    tag = property(lambda self: self._mem[_TAG], lambda self, v: self._mem.__setitem__(_TAG, v))
    error = property(lambda self: self._mem[_ERROR], lambda self, v: self._mem.__setitem__(_ERROR, v))

    @property
    def _nbytes(self):
        return (self._mem[_LO] & 0xFFFFFFFF) | ((self._mem[_HI] & 0x7FFFFFFF) >> 1) << 32

    @_nbytes.setter
    def _nbytes(self, n):
        self._mem[_LO], self._mem[_HI] = _count_words(n, self._mem[_HI] & 1)

    @property
    def _cancelled(self):
        return bool(self._mem[_HI] & 1)

    @_cancelled.setter
    def _cancelled(self, flag):
        self._mem[_HI] = (self._mem[_HI] & ~1) | bool(flag)

    def Get_source(self):
        """Get_source(self)

        Get message source.
        """
        return self.source

    def Set_source(self, source):
        """Set_source(self, source)

        Set message source.
        """
        self.source = source

    def Get_tag(self):
        """Get_tag(self)

        Get message tag.
        """
        return self.tag

    def Set_tag(self, tag):
        """Set_tag(self, tag)

        Set message tag.
        """
        self.tag = tag

    def Get_error(self):
        """Get_error(self)

        Get message error.
        """
        return self.error

    def Set_error(self, error):
        """Set_error(self, error)

        Set message error.
        """
        self.error = error

    def Get_count(self, datatype=None):
        """Get_count(self, datatype=None)

        Number of ``datatype`` items received (bytes by default).
        """
        size = 1 if datatype is None else datatype.Get_size()
        if size == 0:
            return 0
        q, r = divmod(self._nbytes, size)
        return UNDEFINED if r else q

    def Get_elements(self, datatype):
        """Get_elements(self, datatype)

        Get the number of basic elements in a datatype.

        Number of basic elements received (of a derived ``datatype``'s, a
        last item may be partial).
        """
        n = datatype._layout.elements_in(self._nbytes)
        return UNDEFINED if n is None else n

    def Set_elements(self, datatype, count):
        """Set_elements(self, datatype, count)

        Set what ``Get_elements`` gives (``count`` basic elements of ``datatype``).
        """
        if datatype is None or datatype._layout.elements_in(datatype.Get_size()) in (None, 0):
            self._nbytes = count * (1 if datatype is None else datatype.Get_size())
            return
        per_item = datatype._layout.elements_in(datatype.Get_size())
        whole, rest = divmod(count, per_item)
        self._nbytes = whole * datatype.Get_size() + _bytes_of_elements(datatype, rest)

    def Is_cancelled(self):
        """Is_cancelled(self)

        Test to see if a request was cancelled.
        """
        return self._cancelled

    def Set_cancelled(self, flag):
        """Set_cancelled(self, flag)

        Set the cancelled state associated with a status.
        """
        self._cancelled = bool(flag)

    count = property(Get_count, lambda self, n: self.Set_elements(None, n))
    cancelled = property(Is_cancelled, Set_cancelled)

    def tomemory(self):
        """tomemory(self)

        The status as writable memory (five C ints).
        """
        return memoryview(self._mem)

    def py2f(self):
        return list(self._mem)

    @classmethod
    def f2py(cls, fields):
        self = cls()
        self._mem = array("i", fields)
        return self

    def __reduce__(self):
        return (_rebuilt, (type(self), list(self._mem)))

    def __eq__(self, other):
        return isinstance(other, Status) and self._mem == other._mem

    __hash__ = None

    def __repr__(self):
        return f"<Status source={self.source} tag={self.tag} error={self.error} count={self._nbytes}>"


def _rebuilt(cls, fields):
    status = cls()
    status._mem = array("i", fields)
    return status


def fill(status, source, tag, nbytes, cancelled=False, error=SUCCESS):
    """Fill an optional user-supplied Status."""
    if status is not None:
        status._set(source, tag, nbytes, cancelled, error)


def _bytes_of_elements(datatype, n):
    """Bytes of the first ``n`` basic elements of one ``datatype`` item."""
    layout, nbytes = datatype._layout, 0
    while n and nbytes < datatype.Get_size():
        nbytes += 1
        if layout.elements_in(nbytes) == n:
            return nbytes
    return nbytes
