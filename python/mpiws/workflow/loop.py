"""A looping step (``spec.Loop``): one iteration's bookkeeping, shared by
both forms.

Direct, the step's ranks loop inside their instances and share each
iteration's ``allreduce`` with a collective on a communicator of their own
(``iterate``), so nothing goes back to the manager until the loop ends.
Mediated, the manager invokes every rank's function once per iteration
and reduces their outputs itself (``Exchange``), as a workflow engine
without collectives has to.
"""

import functools
import threading


def mpi_op(name):
    """The MPI operation a loop names (``spec.OPS``: sum, prod, min, max; land). The MPI
    package is imported here, where a loop runs: the workflow package loads without it."""
    from .. import MPI

    return getattr(MPI, name.upper())


def next_inputs(loop, inputs, outputs, reduced):
    """The inputs of the next iteration: ``inputs`` with carried outputs and the reductions put in."""
    nxt = dict(inputs)
    nxt.update({i: outputs[o] for i, o in loop["carry"].items()})
    nxt.update(reduced)
    return nxt


def finished(loop, done, iteration):
    """After iteration ``iteration`` (from 0): whether the loop ends; ``done``: every rank's ``until`` output was true."""
    if loop["until"] is None:
        return iteration + 1 >= loop["iterations"]
    return bool(done) or iteration + 1 >= loop["max"]


def iterate(call, inputs, comm, loop):
    """Direct: ``call(inputs)`` (an iteration's outputs by name) until the loop ends, sharing reductions
    over ``comm`` (the step's ranks); returns (the last iteration's outputs, iterations run)."""
    iteration = 0
    while True:
        outputs = call(inputs)
        done = comm.allreduce(bool(outputs[loop["until"]]), op=mpi_op("land")) if loop["until"] else False
        if finished(loop, done, iteration):
            return outputs, iteration + 1
        reduced = {i: comm.allreduce(outputs[o], op=mpi_op(op)) for i, (o, op) in loop["allreduce"].items()}
        inputs = next_inputs(loop, inputs, outputs, reduced)
        iteration += 1


class Exchange:
    """Mediated: the manager's stand-in for the collective. Each of the
    step's ``width`` units hands in its outputs of an iteration; when all
    have, the reductions and the stop flag are computed, the same for all.
    A unit that fails breaks the exchange, so that the others stop too."""

    def __init__(self, loop, width):
        self.loop, self.width = loop, width
        self.outputs = [None] * width
        self.result = None
        self.error = None
        self.barrier = threading.Barrier(width, action=self._reduce)

    def _reduce(self):
        until = self.loop["until"]
        done = all(bool(o[until]) for o in self.outputs) if until else False
        reduced = {
            i: functools.reduce(mpi_op(op), [o[out] for o in self.outputs])
            for i, (out, op) in self.loop["allreduce"].items()
        }
        self.result = (done, reduced)

    def share(self, index, outputs):
        """Unit ``index``'s outputs of this iteration; returns (done, reductions) once every unit's are in."""
        self.outputs[index] = outputs
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            raise self.error or RuntimeError("the loop's exchange broke") from None
        return self.result

    def fail(self, error):
        if self.error is None:
            self.error = error
        self.barrier.abort()
