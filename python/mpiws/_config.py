"""mpi4py's top-level functions as mpiws has them: ``rc`` (runtime options
set before ``from mpiws import MPI``), ``get_config`` and ``profile``.

mpiws starts every rank itself (``mpiws run``, ``mpiws serve``), always with
full thread support and errors raised as ``MPI.Exception``, so ``rc``'s
options are accepted and kept, as mpi4py's, for programs that set them, and
change nothing. ``get_include`` is not here: mpiws has no C API to compile
against. Adapted from mpi4py's ``src/mpi4py/__init__.py`` (mpi4py/mpi4py at
commit 7c8dac2c; BSD licence, Copyright (c) 2026, Lisandro Dalcin; the text
is in ``mpiws/util/pkl5.py``).
"""


class Rc:
    """Runtime configuration options (mpi4py's ``mpi4py.rc``).

    Attributes
    ----------
    initialize : bool
        Automatic MPI initialization at import (default: True).
    threads : bool
        Request initialization with thread support (default: True).
    thread_level : {"multiple", "serialized", "funneled", "single"}
        Level of thread support to request (default: "multiple").
    finalize : None or bool
        Automatic MPI finalization at exit (default: None).
    fast_reduce : bool
        Use tree-based reductions for objects (default: True).
    recv_mprobe : bool
        Use matched probes to receive objects (default: True).
    irecv_bufsz : int
        Default buffer size in bytes for ``irecv()`` (default = 32768).
    errors : {"exception", "default", "abort", "fatal"}
        Error handling policy (default: "exception").

    mpiws accepts these and keeps them; its ranks are always initialized
    by ``mpiws run`` or ``mpiws serve`` with full thread support.
    """

    initialize = True
    threads = True
    thread_level = "multiple"
    finalize = None
    fast_reduce = True
    recv_mprobe = True
    irecv_bufsz = 32768
    errors = "exception"

    def __init__(self, **kwargs):
        """Initialize options."""
        self(**kwargs)

    def __setattr__(self, name, value):
        """Set option."""
        if not hasattr(self, name):
            raise TypeError(f"object has no attribute {name!r}")
        super().__setattr__(name, value)

    def __call__(self, **kwargs):
        """Update options."""
        for key in kwargs:
            if not hasattr(self, key):
                raise TypeError(f"unexpected argument {key!r}")
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self):
        """Return repr(self)."""
        return "<mpiws.rc>"


rc = Rc()


def get_config():
    """Return a dictionary with information about MPI.

    mpiws is built on no C MPI library, so there is none to give: an empty
    dictionary, as mpi4py gives by default.
    """
    return {}


def profile(name, *, path=None):
    """Support for the MPI profiling interface.

    Loads the shared library ``name`` (``lib{name}.so`` too), searched in
    ``path`` (a sequence of directories, or one; default: the current
    directory), with its symbols global, as mpi4py does: a missing
    library raises ValueError, one that does not load warns. mpiws makes no
    C MPI calls, so a PMPI profiler loaded this way sees none of them.
    """
    import ctypes
    import os
    import pathlib
    import sys
    import warnings

    def find_library(name, path):
        pattern = [("", "")]
        if sys.platform == "darwin":  # pragma: no cover
            pattern.append(("lib", ".dylib"))
        elif os.name == "posix":  # pragma: no cover
            pattern.append(("lib", ".so"))
        elif os.name == "nt":  # pragma: no cover
            pattern.append(("", ".dll"))
        for pth in map(pathlib.Path, path):
            for lib, ext in pattern:
                filename = pth / f"{lib}{name}{ext}"
                if filename.is_file():
                    return str(filename.resolve())
        return None

    if path is None:
        path = [""]
    elif isinstance(path, os.PathLike):
        path = [path]
    elif isinstance(path, str):
        path = path.split(os.pathsep)
    elif isinstance(path, bytes):
        path = path.split(os.fsencode(os.pathsep))

    name = os.fsdecode(name)
    path = list(map(os.fsdecode, path))
    filename = find_library(name, path)
    if filename is None:
        raise ValueError(f"profiler {name!r} not found")
    try:
        mode = os.RTLD_NOW | os.RTLD_GLOBAL
    except AttributeError:  # pragma: no cover
        mode = ctypes.DEFAULT_MODE
    try:
        handle = ctypes.CDLL(filename, mode)
    except OSError as exc:
        warnings.warn(exc.args[0], stacklevel=2)
    else:
        registry = vars(profile).setdefault("registry", [])
        registry.append((name, (handle, filename)))
