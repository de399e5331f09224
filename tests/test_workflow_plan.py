"""The workflow file's checks and the wiring of a direct run, as pure code:
which rank sends what to whom, for chains, scatters, gathers and merges."""

import pytest

from mpiws.workflow import plan, spec, wiring
from mpiws.workflow.spec import WorkflowError


def wf(text):
    import yaml

    return spec.parse(yaml.safe_load(text), path="t.yml")


CHAIN = """
inputs: {m: bytes}
steps:
  a: {service: m:echo, in: {data: m}, out: [data]}
  b: {service: m:echo, in: {data: a/data}, out: [data]}
outputs: {r: b/data}
"""

SCATTER = """
inputs: {xs: "int[]", k: int}
steps:
  sq:  {service: m:square, scatter: x, in: {x: xs}, out: [x]}
  inc: {service: m:add, scatter: a, in: {a: sq/x, b: k}, out: [a]}
  sum: {service: m:total, in: {values: inc/a}, out: [values]}
  two: {service: m:total, in: {values: [sum/values, k]}, out: [values]}
outputs: {s: sum/values, each: inc/a, both: two/values}
"""


def deliver(p, values):
    """Run a plan's wiring with Python functions standing in for the step services."""
    functions = {
        "echo": lambda data: data,
        "square": lambda x: x * x,
        "add": lambda a, b: a + b,
        "total": lambda values: sum(values),
    }
    mail = {}  # (dest, tag, source) -> value
    for dest, tag, v in wiring.sends(
        {k: c for k, c in p.manager["outputs"].items() if k.startswith("in:")},
        0,
        {f"in:{k}": v for k, v in values.items()},
    ):
        mail[(dest, tag, 0)] = v
    for name, cfg in sorted(p.configs.items(), key=lambda kv: kv[1]["first"]):
        step_fn = functions[W.steps[name].target.split(":")[1]]
        for index in range(cfg["width"]):
            rank = cfg["first"] + index
            got = {(n, k, r): mail.pop((rank, t, r)) for n, k, r, t in wiring.receives(cfg["inputs"], index)}
            out = step_fn(**wiring.assemble(cfg["inputs"], got))
            for dest, tag, v in wiring.sends(cfg["outputs"], index, {cfg["out"][0]: out}, name):
                mail[(dest, tag, rank)] = v
    got = {(n, k, r): mail.pop((0, t, r)) for n, k, r, t in wiring.receives(p.manager["inputs"], 0)}
    assert not mail, f"messages nobody received: {mail}"
    return wiring.assemble(p.manager["inputs"], got)


def test_a_chain_passes_the_message_rank_to_rank_and_back_to_the_manager():
    global W
    W = wf(CHAIN)
    p = plan.direct(W, {"m": b"x"})
    assert p.size == 3 and [(g.first, g.width) for g in p.groups.values()] == [(1, 1), (2, 1)]
    assert p.configs["a"]["outputs"]["data"][0]["to"] == 2  # a sends to b, not to the manager
    assert p.configs["b"]["outputs"]["data"][0]["to"] == 0
    assert deliver(p, {"m": b"x"}) == {"out:r": b"x"}


def test_scatter_element_gather_and_merge():
    global W
    W = wf(SCATTER)
    p = plan.direct(W, {"xs": [1, 2, 3], "k": 10})
    assert (p.groups["sq"].width, p.groups["inc"].width, p.groups["sum"].width) == (3, 3, 1)
    modes = {part["mode"] for cfg in p.configs.values() for i in cfg["inputs"].values() for part in i.get("parts", [])}
    assert modes == {"split", "element", "whole", "gather"}
    out = deliver(p, {"xs": [1, 2, 3], "k": 10})
    assert out == {"out:s": 44, "out:each": [11, 14, 19], "out:both": 54}


def test_a_split_of_the_wrong_length_is_an_error_naming_the_step():
    with pytest.raises(WorkflowError, match="scatter over 2 elements"):
        wiring.sends({"x": [{"tag": 1, "to": 3, "width": 2, "mode": "split"}]}, 0, {"x": [1, 2, 3]}, "s")


@pytest.mark.parametrize(
    "text, message",
    [
        ("steps: {a: {service: echo, out: [x]}}", "module:function"),
        ("steps: {a: {service: m:f, in: {x: nope}}}", "no workflow input 'nope'"),
        ("steps: {a: {service: m:f, in: {x: b/y}}, b: {service: m:f, in: {x: a/y}, out: [y]}}", "no output 'y'"),
        ("steps: {a: {service: m:f, in: {x: b/y}, out: [y]}, b: {service: m:f, in: {x: a/y}, out: [y]}}", "cycle"),
        ("steps: {a: {service: m:f, run: x}}", "unknown key run"),
        ("steps: {a: {service: m:f, program: p}}", "exactly one"),
        ("inputs: {x: integer}\nsteps: {a: {service: m:f}}", "type 'integer'"),
        ("steps: {a: {service: f, endpoint: 'ftp://x'}}", "neither"),
        ("steps: {a: {service: m:f, scatter: y, in: {x: {value: 1}}}}", "not one of its inputs"),
        ("steps: {a: {program: p, loop: {iterations: 2}}}", "only a service step loops"),
        ("steps: {a: {service: m:f, loop: {max: 3}}}", "iterations: N .* or until: OUTPUT"),
        ("steps: {a: {service: m:f, out: [d], loop: {iterations: 2, until: d}}}", "one of them"),
        ("steps: {a: {service: m:f, loop: {iterations: 0}}}", "whole number of iterations"),
        ("steps: {a: {service: m:f, out: [y], loop: {until: d}}}", "until: 'd' is not one of the step's outputs"),
        (
            "steps: {a: {service: m:f, out: [y], loop: {iterations: 2, carry: {x: y}}}}",
            "carry: 'x' is not one of the step's inputs",
        ),
        (
            "steps: {a: {service: m:f, in: {x: {value: 1}}, out: [y], loop: {iterations: 2, allreduce: {x: {output: y, op: avg}}}}}",
            "op 'avg'",
        ),
    ],
)
def test_mistakes_in_the_file_are_named(text, message):
    with pytest.raises(WorkflowError, match=message):
        wf(text)


def test_direct_messaging_refuses_a_scatter_whose_length_comes_at_run_time():
    w = wf("""
inputs: {n: int}
steps:
  make: {service: m:f, in: {n: n}, out: [xs]}
  each: {service: m:g, scatter: x, in: {x: make/xs}, out: [y]}
""")
    with pytest.raises(WorkflowError, match="known only when it has run"):
        plan.direct(w, {"n": 3})


LOOP = """
inputs: {xs: "int[]"}
steps:
  it: {service: m:f, scatter: x, in: {x: xs, total: {value: 0}}, out: [x, part, ok],
       loop: {until: ok, max: 50, carry: {x: x}, allreduce: {total: {output: part, op: max}}}}
outputs: {r: it/x}
"""


def test_a_loop_is_in_its_ranks_configuration_and_the_mediated_exchange_reduces_like_the_collective():
    import threading

    from mpiws.workflow import loop

    w = wf(LOOP)
    cfg = plan.direct(w, {"xs": [1, 2, 3]}).configs["it"]
    assert cfg["width"] == 3 and cfg["loop"] == {
        "iterations": None,
        "until": "ok",
        "max": 50,
        "carry": {"x": "x"},
        "allreduce": {"total": ["part", "max"]},
    }

    # Every rank counts up to the largest value shared the iteration before; each stops when it got there.
    def body(x, total):
        return {"x": x + 1 if x < total else x, "part": x, "ok": x >= total > 0}

    ex = loop.Exchange(cfg["loop"], 3)
    results = [None] * 3

    def unit(i, x):
        inputs, n = {"x": x, "total": 0}, 0
        while True:
            out = body(**inputs)
            done, reduced = ex.share(i, out)
            if loop.finished(cfg["loop"], done, n):
                results[i] = (out["x"], n + 1)
                return
            inputs, n = loop.next_inputs(cfg["loop"], inputs, out, reduced), n + 1

    threads = [threading.Thread(target=unit, args=(i, x)) for i, x in enumerate([1, 5, 3])]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == [(5, 6)] * 3  # all at 5, and every rank ran as many iterations
    assert loop.finished({"until": None, "iterations": 3}, False, 2) and not loop.finished(
        {"until": None, "iterations": 3}, True, 1
    )


def test_a_unit_that_fails_breaks_the_exchange_for_the_others():
    import threading

    from mpiws.workflow import loop

    ex = loop.Exchange({"until": None, "iterations": 5, "carry": {}, "allreduce": {}}, 2)
    got = []

    def waiting():
        try:
            ex.share(0, {})
        except Exception as e:  # noqa: BLE001 - the one we check
            got.append(e)

    t = threading.Thread(target=waiting)
    t.start()
    ex.fail(ValueError("unit 1 failed"))
    t.join(10)
    assert len(got) == 1 and str(got[0]) == "unit 1 failed"


def test_an_mpi_error_naming_a_rank_names_its_step():
    """A step's rank that fails under the manager's own receive (chaos
    trials: its endpoint killed) is reported as that step."""
    from mpiws.workflow.direct import failed_step
    from mpiws.workflow.plan import Group, Plan

    plan = Plan(groups={"a": Group("a", 1, 1, False), "b": Group("b", 2, 2, False)})
    assert failed_step(plan, RuntimeError("rank 3 failed: unreachable for 2.2 s")) == "b"
    assert failed_step(plan, RuntimeError("rank 1 at http://x:1: gone")) == "a"
    assert failed_step(plan, RuntimeError("rank 9 failed")) is None
    assert failed_step(plan, RuntimeError("no rank here")) is None
