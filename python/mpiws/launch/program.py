"""How a rank's program is named, as to ``python``: ``prog.py``, ``-m
module`` or ``-c code``, then its arguments; and the one service a rank of
``mpiws run`` serves. Apart from ``worker`` so that the launcher, which only
names programs, does not import what runs them (the MPI package)."""

SERVICE = "script"

#: The forms a program comes in, by the ``python`` flag that names it (none: a file).
FLAGS = {"-m": "module", "-c": "code"}


def python_argv(program, args, form="path"):
    """What ``python`` is given to run ``program`` in ``form`` with ``args``."""
    flags = [f for f, name in FLAGS.items() if name == form]
    return [*flags, program, *args]


def from_python_argv(argv):
    """(form, program, args) from ``python_argv``'s list."""
    if argv[0] in FLAGS:
        return FLAGS[argv[0]], argv[1], argv[2:]
    return "path", argv[0], argv[1:]
