"""The classic form, for comparison: the manager invokes each step when its
inputs are known and every result comes back to it, to be sent out again
to the next step. A service step is invoked as a domain of two ranks (the
manager and the instance); a program step's files are downloaded to the
manager and uploaded again.
"""

from . import plan as planning
from .domain import StepDomain, Wake, failure
from .flow import Dataflow
from .spec import Source


def execute(run):
    """Run ``run.wf`` with the manager relaying everything; its outputs by name."""
    wf = run.wf
    have = {Source(None, k): v for k, v in run.values.items()}
    wake = Wake()
    flow = Dataflow(wf, wf.order(), lambda step, index, inputs: unit(run, step, index, inputs), wake, run.record)
    try:
        while True:
            wake.look()
            flow.poll(have)
            if flow.finished:
                break
            wake.sleep(0.5)
    except BaseException:
        run.jobs.kill_all()
        raise
    return {name: run.final(src, have[src]) for name, src in wf.outputs.items()}


def unit(run, step, index, inputs):
    if step.kind == "program":
        return run.program_unit(step, index, inputs, relayed=True)
    return invoke(run, step, index, {k: run.for_service(v) for k, v in inputs.items()})


def invoke(run, step, index, inputs):
    """One invocation of a service step: its inputs sent, its outputs received back."""
    cfg = planning.invocation(step)
    dom = StepDomain([run.url(step)], run.key, run.advertise)
    wake = Wake()
    try:
        dom.start(run.deployed(step), cfg, [1])
        run.record.unit(step.name, index, "running", rank=1)
        dom.watch(1, wake.report)
        with dom.comm() as comm:
            sent = []
            for name, spec in cfg["inputs"].items():
                sent.append(comm.isend(inputs[name], dest=1, tag=spec["parts"][0]["tag"]))
                run.count(inputs[name])
            recvs = {name: comm.irecv(source=1, tag=conns[0]["tag"], schedule=wake.schedule)
                     for name, conns in cfg["outputs"].items()}
            outputs = {}
            while True:
                wake.look()
                for name, req in list(recvs.items()):
                    done, value = req.test()
                    if done:
                        outputs[name] = value
                        run.count(value)
                        del recvs[name]
                sent = [r for r in sent if not r.test()[0]]
                status = wake.ended.get(1)
                if status is not None and status.get("state") != "done":
                    run.record.unit(step.name, index, "failed")
                    raise failure(step.name, status)
                if not recvs and not sent and status is not None:
                    break
                wake.sleep(0.5)
    except BaseException:
        dom.cancel()
        raise
    dom.close()
    run.record.unit(step.name, index, "done", **(status.get("result") or {}))
    return outputs
