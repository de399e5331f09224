"""The classic form, for comparison: the manager invokes each step when its
inputs are known and every result comes back to it, to be sent out again
to the next step. A service step is invoked as a domain of two ranks (the
manager and the instance); a program step's files are downloaded to the
manager and uploaded again. A looping step is invoked once per iteration
and rank, the manager reducing what the ranks share (``loop.Exchange``).
"""

import threading

from . import plan as planning
from .domain import StepDomain, Wake, failure
from .flow import Dataflow
from .loop import Exchange, finished, next_inputs
from .spec import Source


def execute(run):
    """Run ``run.wf`` with the manager relaying everything; its outputs by name."""
    wf = run.wf
    have = {Source(None, k): v for k, v in run.values.items()}
    wake = Wake()
    exchanges, lock = {}, threading.Lock()  # a looping step's, shared by its units

    def launch(step, index, inputs):
        if step.kind == "program":
            return run.program_unit(step, index, inputs, relayed=True)
        inputs = {k: run.for_service(v) for k, v in inputs.items()}
        if step.loop is None:
            return invoke(run, step, index, inputs)
        with lock:
            if step.name not in exchanges:
                exchanges[step.name] = Exchange(step.loop.as_config(), run.record.steps[step.name]["width"])
        return iterations(run, step, index, inputs, exchanges[step.name])

    flow = Dataflow(wf, wf.order(), launch, wake, run.record)
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


def iterations(run, step, index, inputs, exchange):
    """Unit ``index`` of a looping step: one invocation per iteration, the reductions made by the manager."""
    loop = exchange.loop
    run.record.unit(step.name, index, "running")
    total = {"iterations": 0, "bytes_in": 0, "bytes_out": 0}
    try:
        while True:
            outputs, report = call(run, step, inputs)
            total["iterations"] += 1
            total["bytes_in"] += report.get("bytes_in", 0)
            total["bytes_out"] += report.get("bytes_out", 0)
            done, reduced = exchange.share(index, outputs)
            if finished(loop, done, total["iterations"] - 1):
                break
            inputs = next_inputs(loop, inputs, outputs, reduced)
    except BaseException as e:
        exchange.fail(e)
        run.record.unit(step.name, index, "failed")
        raise
    run.record.unit(step.name, index, "done", **total)
    return outputs


def invoke(run, step, index, inputs):
    """One invocation of a service step, recorded as its unit ``index``."""
    run.record.unit(step.name, index, "running")
    try:
        outputs, report = call(run, step, inputs)
    except BaseException:
        run.record.unit(step.name, index, "failed")
        raise
    run.record.unit(step.name, index, "done", **report)
    return outputs


def call(run, step, inputs):
    """A service step called once: its inputs sent, its outputs received back; (outputs, its report)."""
    cfg = planning.invocation(step)
    dom = StepDomain([run.url(step)], run.key, run.advertise)
    wake = Wake()
    try:
        dom.start(run.deployed(step), cfg, [1])
        dom.watch(1, wake.report)
        with dom.comm() as comm:
            sent = []
            for name, spec in cfg["inputs"].items():
                sent.append(comm.isend(inputs[name], dest=1, tag=spec["parts"][0]["tag"]))
                run.count(inputs[name])
            recvs = {
                name: comm.irecv(source=1, tag=conns[0]["tag"], schedule=wake.schedule)
                for name, conns in cfg["outputs"].items()
            }
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
                    raise failure(step.name, status)
                if not recvs and not sent and status is not None:
                    break
                wake.sleep(0.5)
    except BaseException:
        dom.cancel()
        raise
    dom.close()
    return outputs, status.get("result") or {}
