"""Workflows run end to end: services passing data directly (chain, scatter,
gather, multi-input), programs passing files by reference, a step on a second
endpoint process, a failing step, and the mediated form giving the same
outputs while the manager carries every byte."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import mpiws_serve

from mpiws import workflow
from mpiws.workflow.values import LocalFile

ROOT = Path(__file__).resolve().parent.parent
FLOWS = ROOT / "examples" / "workflows"
MPIWS = Path(sys.executable).parent / "mpiws"


def both(flow, inputs, tmp_path, **kw):
    """Run ``flow`` directly and mediated; their (outputs, records)."""
    got = {}
    for mode in ("direct", "mediated"):
        got[mode] = workflow.run(flow, inputs, mode=mode, outdir=str(tmp_path / mode), progress=False, **kw)
    return got


def same(a, b):
    """Output objects equal, files by checksum and size (their paths differ)."""

    def strip(o):
        return json.loads(
            json.dumps(o), object_hook=lambda d: {k: v for k, v in d.items() if k not in ("path", "location")}
        )

    return strip(a) == strip(b)


def test_a_chain_moves_the_message_step_to_step_and_the_mediated_form_relays_it(tmp_path):
    message = os.urandom(200_000)
    got = both(FLOWS / "chain.yml", {"message": message}, tmp_path)
    for mode, (_out, rec) in got.items():
        assert (tmp_path / mode / "message").read_bytes() == message
        assert rec["state"] == "done" and all(s["state"] == "done" for s in rec["steps"].values())
        assert rec["steps"]["s2"]["bytes_in"] == rec["steps"]["s2"]["bytes_out"] == len(message)
    assert same(got["direct"][0], got["mediated"][0])
    # Direct: the manager sends the input and receives the output. Mediated: in and out of every step.
    assert got["direct"][1]["manager_bytes"] == 2 * len(message)
    assert got["mediated"][1]["manager_bytes"] == 2 * 3 * len(message)


def test_scatter_gather_and_a_step_with_two_inputs(tmp_path):
    got = both(FLOWS / "squares.yml", {"xs": [1, 2, 3, 4, 5], "offset": 100}, tmp_path)
    want = {"squares": [1, 4, 9, 16, 25], "total": 155, "count": 5, "mean": 11.0}
    for mode, (out, rec) in got.items():
        assert out == want, mode
        assert rec["steps"]["square"]["width"] == 5 and len(rec["steps"]["square"]["units"]) == 5


def test_programs_pass_files_by_reference_and_a_service_between_them(tmp_path):
    text = tmp_path / "in.txt"
    text.write_bytes(b"by reference\n" * 5000)
    got = both(FLOWS / "files.yml", {"text": LocalFile(str(text))}, tmp_path)
    for mode, (_out, rec) in got.items():
        assert (tmp_path / mode / "copy").read_bytes() == text.read_bytes()
        assert (tmp_path / mode / "loud").read_bytes() == text.read_bytes().upper()
        assert all(u.get("job", "").startswith("http") for u in rec["steps"]["first"]["units"].values())
    assert same(got["direct"][0], got["mediated"][0])
    n = len(text.read_bytes())
    # Direct: the file goes job to job (first -> second); the manager uploads the input, relays what
    # crosses to and from the service (in and out: 4), fetches the two outputs. Mediated: it also
    # fetches every job's output and uploads it to the next (8), its outputs among them.
    assert got["direct"][1]["manager_bytes"] == 7 * n
    assert got["mediated"][1]["manager_bytes"] == 8 * n


def serve():
    return mpiws_serve(
        [
            "--service",
            "echo=examples.workflows.steps:echo",
            "--service",
            "upper=examples.workflows.steps:upper_bytes",
            "--fetch-allow",
            "127.0.0.1",
            "--program",
            "copy=examples/workflows/copy.sh [in:file:src:binary] [out:file:dst:binary]",
        ],
        cwd=ROOT,
    )


def test_steps_on_a_second_endpoint_process_beside_local_ones(tmp_path):
    server, url = serve()
    try:
        flow = tmp_path / "remote.yml"
        flow.write_text(f"""
inputs: {{text: file}}
endpoints: {{far: "{url}"}}
steps:
  copy1: {{program: "{FLOWS}/copy.sh [in:file:src:binary] [out:file:dst:binary]", in: {{src: text}}, out: [dst]}}
  copy2: {{program: copy, endpoint: far, in: {{src: copy1/dst}}, out: [dst]}}
  loud:  {{service: upper, endpoint: far, in: {{text: copy2/dst}}, out: [text]}}
  back:  {{service: steps:echo, in: {{data: loud/text}}, out: [data]}}
  far2:  {{service: echo, endpoint: far, in: {{data: back/data}}, out: [data]}}
outputs: {{result: far2/data}}
""")
        os.symlink(FLOWS / "steps.py", tmp_path / "steps.py")
        text = tmp_path / "in.txt"
        text.write_bytes(b"far away\n")
        got = both(flow, {"text": LocalFile(str(text))}, tmp_path)
        for mode, (_out, rec) in got.items():
            assert (tmp_path / mode / "result").read_bytes() == b"FAR AWAY\n", mode
            assert rec["steps"]["copy2"]["endpoint"] == url and rec["steps"]["far2"]["state"] == "done"
        # Its jobs and the uploads made for them are gone from the endpoint with the runs (its disk given back).
        from mpiws.jobs import _call

        assert _call("GET", f"{url}/jobs") == [], "jobs left behind"
    finally:
        server.kill()
        server.wait()


def test_a_failing_step_is_named_with_its_traceback_and_the_rest_cancelled(tmp_path):
    flow = tmp_path / "failing.yml"
    flow.write_text("""
inputs: {x: int}
steps:
  ok:    {service: steps:square, in: {x: x}, out: [x]}
  bad:   {service: steps:fail, in: {x: ok/x}, out: [y]}
  after: {service: steps:echo, in: {data: bad/y}, out: [data]}
outputs: {y: after/data}
""")
    os.symlink(FLOWS / "steps.py", tmp_path / "steps.py")
    for extra in ([], ["--mediated"]):
        record = tmp_path / "record.json"
        p = subprocess.run(
            [str(MPIWS), "workflow", "run", str(flow), "x=3", "--record", str(record), *extra],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert p.returncode == 1, p.stderr
        assert "step bad failed: ValueError: this step fails on purpose (given 9)" in p.stderr
        assert "raise ValueError" in p.stderr  # the traceback's tail
        assert p.stdout == ""
        rec = json.loads(record.read_text())
        assert rec["state"] == "failed" and rec["steps"]["bad"]["state"] == "failed"
        # Mediated, ok ran before bad started; direct, all started at once, ok may not have reported yet.
        assert rec["steps"]["ok"]["state"] == "done" if extra else rec["steps"]["ok"]["state"] in ("done", "cancelled")
        assert rec["steps"]["after"]["state"] == "cancelled"


def test_the_command_line_prints_the_output_object_and_draws_the_graph(tmp_path):
    p = subprocess.run(
        [
            str(MPIWS),
            "workflow",
            "run",
            str(FLOWS / "squares.yml"),
            "xs=[2,3]",
            "--graph",
            str(tmp_path / "g.dot"),
            "--record",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {"squares": [4, 9], "total": 13, "count": 2, "mean": 6.5}
    assert re.search(r"square x2: done in [0-9.]+ s", p.stderr)
    dot = (tmp_path / "g.dot").read_text()
    assert '"square" -> "sum"' in dot and "done" in dot
    bad = subprocess.run(
        [str(MPIWS), "workflow", "run", str(FLOWS / "squares.yml"), "ys=1"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 1 and "has no input ys" in bad.stderr


def test_a_picture_that_cannot_be_drawn_is_refused_in_one_line_before_any_step_runs(tmp_path):
    # No Graphviz on this PATH (the interpreter's own directory only): .svg cannot be drawn.
    env = dict(os.environ, PATH=str(MPIWS.parent))
    record = tmp_path / "r.json"
    run = [str(MPIWS), "workflow", "run", str(FLOWS / "squares.yml"), "xs=[2,3]", "--record", str(record)]
    p = subprocess.run([*run, "--graph", str(tmp_path / "g.svg")], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1 and p.stdout == "", p
    assert p.stderr.strip().splitlines() == [
        f"mpiws workflow: drawing {tmp_path / 'g.svg'} needs Graphviz's dot (apt-get install graphviz), or ask for a .dot file"
    ]
    assert not record.exists(), "no step ran"
    p = subprocess.run([*run, "--graph", str(tmp_path / "g.gif")], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1 and "is .svg, .png or .dot" in p.stderr and len(p.stderr.splitlines()) == 1
    g = subprocess.run(
        [str(MPIWS), "workflow", "graph", str(FLOWS / "squares.yml"), "-o", str(tmp_path / "g.png")],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert g.returncode == 1 and "Traceback" not in g.stderr and "needs Graphviz's dot" in g.stderr, g


def test_a_loop_iterates_inside_the_domain_and_its_mediated_form_reinvokes_every_iteration(tmp_path):
    blocks = [[1, 2], [30, 40], [500], [6000, 7000, 8000]]
    got = both(FLOWS / "relax.yml", {"blocks": blocks, "tolerance": 0.01}, tmp_path)
    mean = sum(map(sum, blocks)) / sum(map(len, blocks))
    for mode, (out, rec) in got.items():
        assert all(abs(x - mean) <= 0.01 for b in out["blocks"] for x in b), mode
        assert [len(b) for b in out["blocks"]] == [len(b) for b in blocks]
        units = rec["steps"]["relax"]["units"]
        assert {u["iterations"] for u in units.values()} == {21}, mode  # every rank stopped together
    assert got["direct"][0] == got["mediated"][0]
    # Direct: only the blocks in and out pass the manager, whatever the iterations; mediated: every one.
    assert got["mediated"][1]["manager_bytes"] > 15 * got["direct"][1]["manager_bytes"]
    # A fixed number of iterations, the same file otherwise.
    fixed = tmp_path / "fixed.yml"
    fixed.write_text((FLOWS / "relax.yml").read_text().replace("until: done\n      max: 200", "iterations: 3"))
    os.symlink(FLOWS / "steps.py", tmp_path / "steps.py")
    out, rec = workflow.run(fixed, {"blocks": blocks}, outdir=str(tmp_path), progress=False)
    assert {u["iterations"] for u in rec["steps"]["relax"]["units"].values()} == {3}
    assert out["blocks"][0][0] == pytest.approx(mean - (mean - 1) / 4)  # moved halfway twice (nothing to move by at 0)


def test_a_step_whose_endpoint_is_gone_at_the_start_is_named(tmp_path):
    """Its endpoint gone (killed, unreachable) before the step's instance
    started: the run fails naming that step, not a rank number (chaos trials)."""
    import socket

    s = socket.create_server(("127.0.0.1", 0))
    gone = "http://127.0.0.1:%d" % s.getsockname()[1]
    s.close()  # nothing listens there now
    flow = tmp_path / "gone.yml"
    flow.write_text(f"""
inputs: {{x: int}}
steps:
  first:  {{service: steps:square, in: {{x: x}}, out: [x]}}
  far:    {{service: square, endpoint: "{gone}", in: {{x: first/x}}, out: [x]}}
outputs: {{y: far/x}}
""")
    os.symlink(FLOWS / "steps.py", tmp_path / "steps.py")
    p = subprocess.run(
        [str(MPIWS), "workflow", "run", str(flow), "x=3"], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert p.returncode == 1, p.stderr
    assert "step far failed: could not be started" in p.stderr and gone in p.stderr, p.stderr
