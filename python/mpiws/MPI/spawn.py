"""Dynamic processes: ``Intracomm.Spawn`` and ``Comm.Get_parent``.

mpiws spawns Python programs: the command is a Python interpreter (this
one, or any named ``python...``) and the arguments what it is given
(interpreter flags, then ``prog.py``, ``-m module`` or ``-c code``, then
the program's arguments). The children start on this machine
(``launch/spawn.py``) and join the spawning ranks in a new domain; the
intercommunicator between them is what MPI_Comm_spawn gives.

How children start is the launcher's: ``mpiws.launch.spawn`` registers it
with the binding when it is imported (the ``mpiws`` package imports it), so
this file never imports the launcher.
"""

import os
import re
import sys

from .. import binding
from .comm import constructor
from .exception import ERR_ARG, ERR_SPAWN, Exception as MPIException
from .intercomm import Intercomm, _make

#: An interpreter's name, as ``Spawn``'s command may give it.
_PYTHON = re.compile(r"python[0-9.]*(\.exe)?$")


def _python_argv(command, args):
    """(interpreter flags, the program's ``python`` argv) for ``command args``."""
    if not (command == sys.executable or _PYTHON.match(os.path.basename(str(command)))):
        raise MPIException(
            ERR_SPAWN, f"mpiws spawns Python programs (a python interpreter as the command), not {command!r}"
        )
    args = [str(a) for a in (args or [])]
    flags = []
    while args and args[0].startswith("-") and args[0] not in ("-m", "-c", "-"):
        flags.append(args.pop(0))
    if not args:
        raise MPIException(ERR_ARG, "Spawn: no program among the arguments (prog.py, -m module or -c code)")
    return flags, args


@constructor
def spawn(comm, command, args, maxprocs, root):
    """MPI_Comm_spawn over intracommunicator ``comm`` (collective; the
    root's ``command``, ``args`` and ``maxprocs`` count)."""
    endpoint = binding.process_endpoint()
    urls = comm.allgather(endpoint.url if endpoint is not None else None)
    if None in urls:
        raise MPIException(
            ERR_SPAWN,
            "Spawn needs every spawning rank to serve its own endpoint "
            "(a program run by mpiws run, a spawned one, or python prog.py), not a served instance",
        )
    launcher = binding.spawner()
    if launcher is None:
        raise MPIException(ERR_SPAWN, "no launcher to start processes with (mpiws.launch.spawn registers it)")
    start, new_domain, sides = launcher
    started, failure = None, None
    if comm.Get_rank() == root:
        try:
            if int(maxprocs) < 1:
                raise MPIException(ERR_ARG, f"Spawn: maxprocs must be positive, got {maxprocs}")
            flags, argv = _python_argv(command, args)
            children = start(argv, int(maxprocs), flags)
            started = (*new_domain(), children.urls)
        except (MPIException, OSError, RuntimeError) as e:
            failure = e
    started = comm.bcast(started if failure is None else repr(failure), root)
    if isinstance(started, str):
        raise failure if failure is not None else MPIException(ERR_SPAWN, f"Spawn failed at the root: {started}")
    domain, token, child_urls = started
    instance = endpoint.create_instance(domain, comm.Get_rank(), urls + child_urls, token)
    instance.set_running()
    if comm.Get_rank() == root:
        children.bind(instance, domain, token, urls + child_urls, len(urls), len(urls))
    _, inter, inter_local = sides(instance, len(urls))
    return _make(inter, inter_local)


@constructor
def get_parent():
    """The intercommunicator to the ranks that spawned this process (null
    if none did)."""
    parent = binding.current().parent
    return parent if parent is not None else Intercomm()
