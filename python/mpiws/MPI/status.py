"""``MPI.Status``: source, tag, error and size of a received message."""

from .exception import SUCCESS

ANY_SOURCE = -2
ANY_TAG = -1
UNDEFINED = -32766


class Status:
    __slots__ = ("source", "tag", "error", "_nbytes", "_cancelled")

    def __init__(self, status=None):
        if status is not None:
            self.source, self.tag, self.error = status.source, status.tag, status.error
            self._nbytes, self._cancelled = status._nbytes, status._cancelled
        else:
            self.source, self.tag, self.error = ANY_SOURCE, ANY_TAG, SUCCESS
            self._nbytes, self._cancelled = 0, False

    def _set(self, source, tag, nbytes, cancelled=False, error=SUCCESS):
        self.source, self.tag, self._nbytes, self._cancelled, self.error = source, tag, nbytes, cancelled, error

    def Get_source(self):
        return self.source

    def Set_source(self, source):
        self.source = source

    def Get_tag(self):
        return self.tag

    def Set_tag(self, tag):
        self.tag = tag

    def Get_error(self):
        return self.error

    def Set_error(self, error):
        self.error = error

    def Get_count(self, datatype=None):
        """Number of ``datatype`` items received (bytes by default)."""
        size = 1 if datatype is None else datatype.Get_size()
        if size == 0:
            return 0
        q, r = divmod(self._nbytes, size)
        return UNDEFINED if r else q

    def Get_elements(self, datatype):
        return self.Get_count(datatype)

    def Set_elements(self, datatype, count):
        self._nbytes = count * (1 if datatype is None else datatype.Get_size())

    def Is_cancelled(self):
        return self._cancelled

    def Set_cancelled(self, flag):
        self._cancelled = bool(flag)

    @property
    def count(self):
        return self.Get_count()

    @property
    def cancelled(self):
        return self._cancelled

    def __repr__(self):
        return f"<Status source={self.source} tag={self.tag} error={self.error} count={self._nbytes}>"


def fill(status, source, tag, nbytes, cancelled=False):
    """Fill an optional user-supplied Status."""
    if status is not None:
        status._set(source, tag, nbytes, cancelled)
