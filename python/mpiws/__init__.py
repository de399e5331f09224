"""mpiws: MPI-style message passing between web services.

Every rank is a web service instance; instances talk to each other directly
over HTTP. Write programs against ``from mpiws import MPI`` exactly as with
mpi4py; run them with ``mpiws run -n N prog.py`` or deploy services with
``mpiws serve`` and start domains on them with ``mpiws run --endpoints``.
"""

from . import _core

__version__ = _core.VERSION

from . import MPI  # noqa: E402  (needs _core loaded first)
from .launch import spawn as _spawn  # noqa: E402, F401  (registers how MPI's Spawn starts processes)
from ._config import get_config, profile, rc  # noqa: E402  (mpi4py's top-level functions)

__all__ = ["MPI", "__version__", "get_config", "profile", "rc"]
