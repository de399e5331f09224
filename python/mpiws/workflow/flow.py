"""The manager's dataflow: steps it runs itself, each as soon as its inputs
are known (all steps when mediated; program steps when direct).

Values are keyed by their ``Source`` (a workflow input, or a step's
output). A ready step runs as *units*, one per element when it scatters
(``dotproduct``: the i-th elements together), each on a thread of its own
that calls ``launch(step, index, inputs)`` and returns its outputs; when
all units of a step are done, its outputs (lists, when it scattered) are
known. A unit's exception fails the run.
"""

import threading

from .spec import Literal, Source, WorkflowError


class Dataflow:
    def __init__(self, wf, names, launch, wake, record):
        self.wf, self.launch, self.wake, self.record = wf, launch, wake, record
        self.waiting = list(names)
        self.running = {}  # step -> [outputs or None per unit]
        self.errors = []
        self.lock = threading.Lock()

    @property
    def finished(self):
        return not self.waiting and not self.running

    def inputs(self, step, have):
        """The step's inputs from ``have``, or None if some are not known yet."""
        got = {}
        for name, v in step.inputs.items():
            if isinstance(v, Literal):
                got[name] = v.value
            elif isinstance(v, list):
                if any(src not in have for src in v):
                    return None
                got[name] = [have[src] for src in v]
            elif v in have:
                got[name] = have[v]
            else:
                return None
        return got

    def units(self, step, inputs):
        return dotproduct(inputs, step.scatter, f"step {step.name}")

    def poll(self, have):
        """Take in what ended (into ``have``), then start what is ready; raises a unit's error."""
        if self.errors:
            raise self.errors[0]
        while self._collect(have) | self._start(have):
            pass

    def _collect(self, have):
        collected = False
        for name, outs in list(self.running.items()):
            if all(o is not None for o in outs):
                collected = True
                step = self.wf.steps[name]
                del self.running[name]
                for o in step.outputs:
                    vals = [u.get(o) for u in outs]
                    have[Source(name, o)] = vals if step.scatter else vals[0]
        return collected

    def _start(self, have):
        started = False
        for name in list(self.waiting):
            step = self.wf.steps[name]
            inputs = self.inputs(step, have)
            if inputs is None:
                continue
            self.waiting.remove(name)
            started = True
            units = self.units(step, inputs)
            self.record.expect(name, len(units))
            self.running[name] = [None] * len(units)
            for i, u in enumerate(units):
                threading.Thread(target=self._unit, args=(step, i, u), name=f"mpiws-wf-{name}-{i}", daemon=True).start()
        return started

    def _unit(self, step, index, inputs):
        try:
            outputs = self.launch(step, index, inputs)
            with self.lock:
                self.running[step.name][index] = outputs
        except BaseException as e:  # noqa: BLE001 - the manager raises it
            self.errors.append(e)
        finally:
            self.wake()


def dotproduct(inputs, scatter, where, error=WorkflowError):
    """The units of a step that scatters over the inputs named in ``scatter`` (none: one unit, ``inputs``),
    their i-th elements together."""
    if not scatter:
        return [inputs]
    lengths = set()
    for name in scatter:
        if not isinstance(inputs[name], (list, tuple)):
            raise error(f"{where} scatters over {name}, which is not a list")
        lengths.add(len(inputs[name]))
    if len(lengths) > 1:
        raise error(
            f"{where}: the inputs it scatters over (dotproduct) have different lengths "
            f"({', '.join(map(str, sorted(lengths)))})"
        )
    n = lengths.pop()
    return [dict(inputs, **{name: inputs[name][i] for name in scatter}) for i in range(n)]
