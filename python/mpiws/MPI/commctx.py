"""mpi4py's private communicator context helpers, which ``mpi4py.util``
(``mpiws.util``) builds on: ``_comm_lock`` (a lock per communicator and key)
and ``_commctx_intra`` / ``_commctx_inter`` (a duplicate of a communicator
kept on it for a library's own traffic, with a fresh tag on every call),
as mpi4py's ``commimpl.pxi`` and ``pympicommctx.h`` have them. Both live in
attributes of the communicator (``attributes``): a duplicate does not
inherit them and freeing the communicator frees them.
"""

import threading

from .._core import TAG_UB
from .attributes import Attributes

_lock = threading.Lock()
_keyvals = {}


def _keyval(name, delete_fn=None):
    keyval = _keyvals.get(name)
    if keyval is None:
        keyval = _keyvals[name] = Attributes.Create_keyval(None, delete_fn)
    return keyval


def _comm_lock_table(comm):
    """Internal communicator lock table."""
    with _lock:
        keyval = _keyval("lock")
        table = comm.Get_attr(keyval)
        if table is None:
            table = {}
            comm.Set_attr(keyval, table)
        return table


def _comm_lock(comm, key=None):
    """Create/get communicator lock."""
    table = _comm_lock_table(comm)
    with _lock:
        lock = table.get(key)
        if lock is None:
            lock = table[key] = threading.Lock()
        return lock


class _Ctx:
    __slots__ = ("dupcomm", "localcomm", "tag", "low_group")

    def __init__(self, dupcomm):
        self.dupcomm, self.localcomm, self.tag, self.low_group = dupcomm, None, 0, -1


def _free_ctx(comm, keyval, ctx):
    for c in (ctx.localcomm, ctx.dupcomm):
        if c is not None:
            c.Free()


def _lookup(comm):
    keyval = _keyval("ctx", _free_ctx)
    ctx = comm.Get_attr(keyval)
    if ctx is None:
        ctx = _Ctx(comm.Dup())
        comm.Set_attr(keyval, ctx)
    if ctx.tag >= (TAG_UB or 32767):  # COMM_WORLD's TAG_UB attribute
        ctx.tag = 0
    return ctx


def _commctx_intra(comm):
    """Create/get intracommunicator duplicate."""
    with _comm_lock(comm, "@commctx_intra"):
        ctx = _lookup(comm)
        tag, ctx.tag = ctx.tag, ctx.tag + 1
        return ctx.dupcomm, tag


def _commctx_inter(comm):
    """Create/get intercommunicator duplicate."""
    with _comm_lock(comm, "@commctx_inter"):
        ctx = _lookup(comm)
        if ctx.localcomm is None:
            localsize, remotesize = comm.Get_size(), comm.Get_remote_size()
            merged = comm.Merge(localsize > remotesize)
            ctx.low_group = (
                0 if localsize > remotesize else 1 if localsize < remotesize else int(merged.Get_rank() < localsize)
            )
            group = comm.Get_group()
            ctx.localcomm = merged.Create(group)
            group.Free()
            merged.Free()
        tag, ctx.tag = ctx.tag, ctx.tag + 1
        return ctx.dupcomm, tag, ctx.localcomm, bool(ctx.low_group)
