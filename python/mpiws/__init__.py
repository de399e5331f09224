"""mpiws: MPI-style message passing between web services.

Every rank is a web service instance; instances talk to each other directly
over HTTP. Write programs against ``from mpiws import MPI`` exactly as with
mpi4py; run them with ``mpiws run -n N prog.py`` or deploy services with
``mpiws serve`` and start domains on them with ``mpiws run --endpoints``.
"""

from . import _core

__version__ = _core.VERSION

from .launch import spawn as _spawn  # noqa: E402, F401  (registers how MPI's Spawn starts processes)
from ._config import get_config, profile, rc  # noqa: E402  (mpi4py's top-level functions)

__all__ = ["MPI", "__version__", "get_config", "profile", "rc"]


def __getattr__(name):
    # The MPI package is imported when first asked for (`from mpiws import MPI`
    # does): a process that only launches or serves (`mpiws run`'s own) starts sooner.
    if name == "MPI":
        import importlib

        return importlib.import_module(".MPI", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
