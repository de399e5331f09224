"""``MPI.buffer`` (also ``MPI.memory``): bytes at an address as mpi4py has
them, allocated (``allocate``, ``Alloc_mem``), another object's
(``frombuffer``, ``buffer(obj)``) or raw (``fromaddress``). The buffer
``Attach_buffer`` gives buffered sends is MPI/buffered.py's.

The memory and its buffer protocol are the core's (``_core.Memory``); this
is the sequence API over a memoryview of it. A slice is a buffer over the
same bytes.
"""

from .. import _core
from . import datatype, span


class buffer(_core.Memory):
    """
    Buffer.
    """

    def __new__(cls, *args):
        if len(args) > 1:
            raise TypeError(f"buffer() takes at most 1 argument ({len(args)} given)")
        mem = super().__new__(cls)
        if args:
            mem.attach(args[0])
        return mem

    def attach(self, obj, readonly=None):
        """attach(self, obj, readonly=None)

        Name the memory of an object.

        Name ``obj``'s memory: a C-contiguous buffer's (held), else the
        view ``datatype.as_view`` makes of it (Fortran order, DLPack, CUDA
        array interface), as mpi4py's ``PyMPI_GetBuffer`` takes them.
        """
        try:
            c_buffer = obj is None or memoryview(obj).c_contiguous
        except TypeError:
            c_buffer = False
        if not c_buffer:
            obj = datatype.as_view(obj, writable=readonly is False)
        super().attach(obj, readonly)

    def _on_host(self):
        """_on_host(self)

        Check that a buffer's memory is accessible from the host.

        Mpi4py's ``check_cpu_accessible``: the bytes of a foreign buffer
        advertised on a device (``datatype._Interface``) are not touched.
        """
        view = self.obj
        holder = view.obj if isinstance(view, memoryview) else None
        if isinstance(getattr(holder, "base", None), memoryview):  # numpy's view of exotic items
            holder = holder.base.obj
        if getattr(holder, "device", span.CPU) not in span.HOST:
            raise BufferError("buffer is not CPU-accessible")

    @staticmethod
    def allocate(nbytes, clear=False):
        """allocate(nbytes, clear=False)

        Buffer allocation.
        """
        if not isinstance(nbytes, int):
            raise TypeError(f"expected an int, got {type(nbytes).__name__}")
        if nbytes < 0:
            raise ValueError(f"negative buffer length {nbytes}")
        mem = buffer()
        mem.attach(bytearray(nbytes))  # zeroed, clear or not
        return mem

    @staticmethod
    def frombuffer(obj, readonly=False):
        """frombuffer(obj, readonly=False)

        Buffer from buffer-like object.
        """
        mem = buffer()
        mem.attach(obj, readonly=True if readonly else False)
        return mem

    @staticmethod
    def fromaddress(address, nbytes, readonly=False):
        """fromaddress(address, nbytes, readonly=False)

        Buffer from address and size in bytes.
        """
        mem = buffer()
        mem.at(address, nbytes, readonly)
        return mem

    format = property(lambda self: "B")
    itemsize = property(lambda self: 1)

    def __len__(self):
        return self.nbytes

    def _span(self, item):
        """(start, stop) of a unit-step slice or (i, None) of an index."""
        if isinstance(item, slice):
            start, stop, step = item.indices(self.nbytes)
            if step != 1:
                raise IndexError("only contiguous slices of a buffer")
            return start, max(stop, start)
        if not isinstance(item, int):
            raise TypeError(f"buffer indices must be integers or slices, not {type(item).__name__}")
        i = item + self.nbytes if item < 0 else item
        if not 0 <= i < self.nbytes:
            raise IndexError("buffer index out of range")
        return i, None

    def __getitem__(self, item):
        self._on_host()
        start, stop = self._span(item)
        if stop is None:
            return memoryview(self)[start]
        return buffer.frombuffer(memoryview(self)[start:stop], self.readonly)

    def __setitem__(self, item, value):
        self._on_host()
        start, stop = self._span(item)
        view = memoryview(self)
        if stop is None:
            view[start] = value
        elif isinstance(value, int):
            view[start:stop] = bytes([value]) * (stop - start)
        else:
            view[start:stop] = memoryview(value).cast("B")

    def __delitem__(self, item):
        raise NotImplementedError("a buffer's length is fixed")

    def cast(self, format, shape=None):
        """cast(self, format, shape=None)

        Cast to a `memoryview` with new format or shape.
        """
        self._on_host()
        view = memoryview(self)
        return view.cast(format) if shape is None else view.cast(format, shape)

    def tobytes(self, order=None):  # the bytes in memory order, whatever the order (as mpi4py)
        """tobytes(self, order=None)

        Return the data in the buffer as a byte string.
        """
        self._on_host()
        return memoryview(self).tobytes()

    def toreadonly(self):
        """toreadonly(self)

        Return a readonly version of the buffer object.
        """
        if self.obj is not None:
            return buffer.frombuffer(self.obj, readonly=True)
        return buffer.fromaddress(self.address, self.nbytes, readonly=True)

    def __repr__(self):
        return f"<buffer address={self.address:#x} nbytes={self.nbytes} readonly={self.readonly}>"


memory = buffer


def Alloc_mem(size, info=None):
    """Alloc_mem(size, info=None)

    Allocate memory for message passing and remote memory access.
    """
    return buffer.allocate(size)


def Free_mem(mem):
    """Free_mem(mem)

    Free memory allocated with `Alloc_mem`.
    """
    mem.release()
