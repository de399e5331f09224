"""Direct messaging: every service step starts at once as ranks of one
domain, and each sends its outputs straight to the ranks that take them
(``plan``, ``wiring``). The manager, rank 0, sends the client's inputs,
receives the workflow's outputs, and runs the program steps as their
inputs become known, passing files between jobs by reference. It relays
only what crosses between a program and a service.
"""

import re

from ..MPI.exception import Exception as MPIException
from . import plan as planning
from .domain import StepDomain, Wake, failure
from .spec import StepFailed
from .flow import Dataflow
from .spec import Source
from .wiring import assemble, receives, sends


def execute(run):
    """Run ``run.wf`` directly; its outputs by name."""
    wf = run.wf
    plan = planning.direct(wf, run.values)
    groups = sorted(plan.groups.values(), key=lambda g: g.first)
    urls = [run.url(wf.steps[g.step]) for g in groups for _ in range(g.width)]
    dom = StepDomain(urls, run.key, run.advertise)
    wake = Wake()
    try:
        run.show(dom)
        for g in groups:
            run.record.expect(g.step, g.width)
            if g.width:
                try:
                    dom.start(run.deployed(wf.steps[g.step]), plan.configs[g.step], range(g.first, g.first + g.width))
                except Exception as e:  # noqa: BLE001 - its endpoint gone, unreachable, refusing: the step is named
                    raise StepFailed(g.step, f"could not be started: {e}") from e
            for r in range(g.first, g.first + g.width):
                run.record.unit(g.step, r - g.first, "running", rank=r)
                dom.watch(r, wake.report)
        with dom.comm() as comm:
            try:
                outputs = Manager(run, plan, comm, wake).loop()
            except MPIException as e:  # a step's rank failed under the manager's own call: named
                step = failed_step(plan, e)
                if step is None:
                    raise
                raise StepFailed(step, str(e)) from e
    except BaseException:
        dom.cancel()
        run.jobs.kill_all()
        raise
    dom.close()
    return outputs


def failed_step(plan, error):
    """The step whose rank an MPI error names (``rank N``), or None."""
    for rank in re.findall(r"\brank (\d+)", str(error)):
        step, _ = plan.step_of(int(rank))
        if step is not None:
            return step
    return None


class Manager:
    """Rank 0 of a direct run."""

    def __init__(self, run, plan, comm, wake):
        self.run, self.plan, self.comm, self.wake = run, plan, comm, wake
        self.cfg = plan.manager
        self.have = {Source(None, k): v for k, v in run.values.items()}
        self.sent = []  # send requests
        self.outputs = {}
        self.flow = Dataflow(
            run.wf, [n for n in run.wf.order() if run.wf.steps[n].kind == "program"], run.program_unit, wake, run.record
        )
        self.relayed = set()  # program outputs already sent on to services
        self.taken = set()  # the manager's inputs already assembled
        # the messages each of them is made of
        self.expected = {
            name: [(n, k, r) for n, k, r, _ in receives({name: spec}, 0)] for name, spec in self.cfg["inputs"].items()
        }

    def send(self, out, value):
        for dest, tag, v in sends({out: self.cfg["outputs"][out]}, 0, {out: value}, "manager"):
            self.run.count(v)
            self.sent.append(self.comm.isend(v, dest=dest, tag=tag))

    def loop(self):
        run, wf = self.run, self.run.wf
        for out in self.cfg["outputs"]:
            if out.startswith("in:"):
                self.send(out, run.for_service(self.have[Source(None, out[3:])]))
        expected = receives(self.cfg["inputs"], 0)
        pending = [
            ((n, k, r), self.comm.irecv(source=r, tag=t, schedule=self.wake.schedule)) for n, k, r, t in expected
        ]
        received = {}
        ranks = {r for g in self.plan.groups.values() for r in range(g.first, g.first + g.width)}
        while True:
            self.wake.look()
            ended = dict(self.wake.ended)  # one view per turn: a rank ending meanwhile is recorded next turn
            for rank, status in ended.items():
                step, index = self.plan.step_of(rank)
                if status.get("state") != "done":
                    run.record.unit(step, index, "failed")
                    raise failure(step, status)
                run.record.unit(step, index, "done", **(status.get("result") or {}))
            still = []
            for key, req in pending:
                done, value = req.test()
                if done:
                    received[key] = value
                else:
                    still.append((key, req))
            pending = still
            self._take(received)
            self.flow.poll(self.have)
            self._relay_programs()
            self.sent = [r for r in self.sent if not r.test()[0]]
            if not pending and self.flow.finished and not self.sent and ranks <= ended.keys():
                break
            self.wake.sleep(0.5)
        return {
            name: self.outputs[name] if name in self.outputs else run.final(src, self.have[src])
            for name, src in wf.outputs.items()
        }

    def _take(self, received):
        """Inputs of the manager all of whose messages are here: program inputs and the workflow's outputs."""
        for name, spec in self.cfg["inputs"].items():
            if name not in self.taken and all(key in received for key in self.expected[name]):
                self.taken.add(name)
                value = assemble({name: spec}, received)[name]
                self.run.count(value)
                if name.startswith("out:"):
                    self.outputs[name[4:]] = value
                else:
                    self.have[Source(*name[5:].split("/", 1))] = value

    def _relay_programs(self):
        """Program outputs that services take, sent to them once known."""
        for out in self.cfg["outputs"]:
            if out.startswith("prog:") and out not in self.relayed:
                src = Source(*out[5:].split("/", 1))
                if src in self.have:
                    self.relayed.add(out)
                    self.send(out, self.run.service_value(src, self.have[src]))
