"""A step's jobs from the values known (pure): its inputs from their
sources (``linkMerge``, ``pickValue``, ``default``), one job per element
when it scatters (``dotproduct``), then each job's ``valueFrom`` and
``when``, in the order CWL v1.2 gives. Expressions are evaluated by the
core's parameter-reference evaluator (``_core.cwl_eval``): references
only, and in ``when`` also ``!`` and one comparison with a literal; no
JavaScript engine runs."""

import json

from ... import _core
from ..flow import dotproduct
from .load import CwlError, CwlUnsupported


def evaluate(text, inputs, self=None, condition=False, where=""):
    if not isinstance(text, str) or "$(" not in text:
        if isinstance(text, str) and "${" in text:
            raise CwlUnsupported(f"{where}: JavaScript expressions (${{...}}) are not supported")
        return text
    try:
        return json.loads(_core.cwl_eval(text, json.dumps({"inputs": inputs, "self": self, "runtime": {}}), condition))
    except ValueError as e:
        forms = (
            "a parameter reference, !REF, or REF == / != / < / <= / > / >= a literal"
            if condition
            else "a parameter reference"
        )
        raise CwlUnsupported(f"{where}: {e} (mpiws evaluates {forms}, without JavaScript)") from None


def merge(conn, values):
    """A connection's value: its source(s) merged (``linkMerge``) and picked (``pickValue``)."""
    got = [values[s] for s in conn.sources]
    if not conn.multi:
        v = got[0] if got else None
    elif conn.link_merge == "merge_flattened":
        v = []
        for x in got:
            v.extend(x if isinstance(x, list) else [x])
    elif conn.link_merge == "merge_nested":
        v = got
    else:
        raise CwlError(f"linkMerge {conn.link_merge!r} is not merge_nested or merge_flattened")
    return pick(conn.pick_value, v)


def pick(method, v):
    if method is None:
        return v
    present = [x for x in (v or []) if x is not None]
    if method == "first_non_null":
        if not present:
            raise CwlError("pickValue first_non_null: every value is null")
        return present[0]
    if method == "the_only_non_null":
        if len(present) != 1:
            raise CwlError(f"pickValue the_only_non_null: {len(present)} values are not null")
        return present[0]
    if method == "all_non_null":
        return present
    raise CwlUnsupported(f"pickValue {method!r} is not supported")


def jobs(step, values):
    """The step's jobs: [(inputs, run?)], one per scatter element (one without scatter)."""
    where = f"step {step.name}"
    merged = {}
    for name, conn in step.ins.items():
        v = merge(conn, values)
        merged[name] = conn.default if v is None and conn.default is not None else v
    units = dotproduct(merged, step.scatter, where, CwlError)
    out = []
    for unit in units:
        final = dict(unit)
        for name, conn in step.ins.items():
            if conn.value_from is not None:  # each sees the others before their valueFrom
                final[name] = evaluate(conn.value_from, unit, unit[name], where=f"{where}, input {name}: valueFrom")
        run = True
        if step.when is not None:
            verdict = evaluate(step.when, final, condition=True, where=f"{where}: when")
            if not isinstance(verdict, bool):
                raise CwlError(f"{where}: when gave {verdict!r}, not true or false")
            run = verdict
        out.append((final, run))
    return out


def outputs(step, results):
    """The step's outputs from its jobs' (None for a skipped job): lists when it scatters."""
    per = [r if r is not None else {} for r in results]
    if step.scatter:
        return {o: [r.get(o) for r in per] for o in step.outs}
    return {o: per[0].get(o) for o in step.outs}
