"""mpiws-cwl-runner: the cwl-runner interface (what cwltest and users' scripts
call): the output object on stdout, exit 0; 33 for a feature mpiws does not
run (CWL's convention, so a test suite tells it from a wrong document); 1 for
a wrong document or job, or a failed step."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from mpiws.service import cwl_runner

ROOT = Path(__file__).resolve().parent.parent
RUNNER = str(Path(sys.executable).parent / "mpiws-cwl-runner")
EXAMPLES = ROOT / "examples" / "workflows" / "cwl"


def runner(*args, cwd=None):
    return subprocess.run([RUNNER, *map(str, args)], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_a_tool_runs_with_its_job_and_prints_its_output_object(tmp_path):
    p = runner(f"--outdir={tmp_path}", "--quiet", EXAMPLES / "chain.cwl", EXAMPLES / "fruit.yml")
    assert p.returncode == 0 and p.stderr == "", p
    out = json.loads(p.stdout)
    assert Path(out["sorted"]["path"]).parent == tmp_path and Path(out["sorted"]["path"]).read_text().isupper()


def test_a_job_value_the_document_does_not_declare_is_left_out(tmp_path):
    # CWL: a job object may carry more than the process's inputs (one job file for several tools).
    job = tmp_path / "job.yml"
    job.write_text(
        (EXAMPLES / "fruit.yml").read_text().replace("fruit.txt", str(EXAMPLES / "fruit.txt")) + "unused: 42\n"
    )
    p = runner(f"--outdir={tmp_path}", "--quiet", EXAMPLES / "chain.cwl", job)
    assert p.returncode == 0, p
    assert Path(json.loads(p.stdout)["sorted"]["path"]).read_text().isupper()


# What mpiws's own step engine does not run: JavaScript in a tool and in a workflow step, a file the
# tool writes from an expression (InitialWorkDirRequirement), a sub-workflow, an ExpressionTool.
JS_TOOL = """cwlVersion: v1.2
class: CommandLineTool
requirements:
  InlineJavascriptRequirement: {}
  InitialWorkDirRequirement:
    listing: [{entryname: greeting.txt, entry: "${return inputs.name.toUpperCase();}"}]
inputs: {name: string}
baseCommand: [cat, greeting.txt]
stdout: out.txt
outputs:
  out: {type: File, outputBinding: {glob: out.txt}}
  n: {type: int, outputBinding: {outputEval: "$(inputs.name.length * 2)"}}
"""

NESTED = """cwlVersion: v1.2
class: Workflow
requirements: {SubworkflowFeatureRequirement: {}, InlineJavascriptRequirement: {}, StepInputExpressionRequirement: {}}
inputs: {text: File}
outputs: {count: {type: int, outputSource: inner/count}}
steps:
  inner:
    in: {f: text}
    out: [count]
    run:
      class: Workflow
      inputs: {f: File}
      outputs: {count: {type: int, outputSource: parse/n}}
      steps:
        wc:
          in: {f: f}
          out: [out]
          run: {class: CommandLineTool, baseCommand: [wc, -l], stdin: $(inputs.f.path), inputs: {f: File},
                outputs: {out: stdout}}
        parse:
          in: {f: wc/out, extra: {valueFrom: "$(1 + 1)"}}
          out: [n]
          run:
            class: ExpressionTool
            inputs: {f: {type: File, loadContents: true}, extra: int}
            outputs: {n: int}
            expression: "${return {n: parseInt(inputs.f.contents) * inputs.extra};}"
"""


def cwltool(*args):
    p = subprocess.run(
        [sys.executable, "-m", "cwltool", "--quiet", "--no-container", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout)


def same_outputs(o):
    """An output object as two runners agree on it: values, and each file's checksum, size and name."""
    return {k: (v["checksum"], v["size"], v["basename"]) if isinstance(v, dict) else v for k, v in o.items()}


def test_what_the_own_engine_does_not_run_runs_by_the_endpoints_cwl_runner_as_cwltool_does(tmp_path):
    tool, flow, text = tmp_path / "js.cwl", tmp_path / "nested.cwl", tmp_path / "three.txt"
    tool.write_text(JS_TOOL)
    flow.write_text(NESTED)
    text.write_text("a\nb\nc\n")
    (tmp_path / "job.yml").write_text("text: {class: File, location: three.txt}\n")
    p = subprocess.run(  # a job given as NAME=VALUE, through mpiws workflow run
        [sys.executable, "-m", "mpiws", "workflow", "run", tool, "name=Ada", "--outdir", tmp_path / "mpiws"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    ours = json.loads(p.stdout)
    assert ours["n"] == 6 and Path(ours["out"]["path"]).read_text() == "ADA", ours
    assert same_outputs(ours) == same_outputs(cwltool("--outdir", tmp_path / "ref", tool, "--name", "Ada"))

    p = runner(f"--outdir={tmp_path / 'mpiws'}", flow, tmp_path / "job.yml")
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout) == {"count": 6} == cwltool("--outdir", tmp_path / "ref", flow, tmp_path / "job.yml")


def test_the_whole_documents_job_runs_on_the_endpoint_and_its_record_says_so(tmp_path):
    flow, text = tmp_path / "nested.cwl", tmp_path / "three.txt"
    flow.write_text(NESTED)
    text.write_text("a\nb\nc\n")
    record = tmp_path / "run.json"
    p = subprocess.run(
        [sys.executable, "-m", "mpiws", "workflow", "run", flow, f"text:@{text}", "--record", record, "--quiet"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    steps = json.loads(record.read_text())["steps"]
    [(name, step)] = steps.items()
    assert name == "nested" and "/jobs/" in step["units"]["0"]["job"] and step["units"]["0"]["state"] == "done", steps


def test_an_unsupported_feature_exits_33_and_a_wrong_document_1(tmp_path):
    expression = tmp_path / "expr.cwl"
    expression.write_text(
        "cwlVersion: v1.2\nclass: ExpressionTool\nrequirements: {InlineJavascriptRequirement: {}}\ninputs: []\n"
        "outputs: {}\nexpression: '${return {};}'\n"
    )
    p = runner("--outdir", tmp_path, expression)
    assert p.returncode == 0 and json.loads(p.stdout) == {}, p  # an ExpressionTool runs (by cwltool)
    inside = tmp_path / "graph.cwl"
    inside.write_text(
        "cwlVersion: v1.2\n$graph:\n- {id: hello, class: CommandLineTool, baseCommand: [echo, hi], stdout: o.txt,"
        " inputs: [], outputs: {o: stdout}}\n- {id: other, class: CommandLineTool, baseCommand: 'false', inputs: [],"
        " outputs: []}\n"
    )
    p = runner("--outdir", tmp_path, f"{inside}#hello")
    assert p.returncode == 0 and json.loads(p.stdout)["o"]["size"] == 3, p  # a process of a packed document, by id
    binary = tmp_path / "bin.cwl"  # a default the document names travels with it, bytes as they are
    blob = bytes(range(256)) * 4
    (tmp_path / "blob").write_bytes(blob)
    binary.write_text(
        "cwlVersion: v1.2\nclass: CommandLineTool\nbaseCommand: cat\nrequirements: {InlineJavascriptRequirement: {}}\n"
        "inputs: {f: {type: File, default: {class: File, location: blob}, inputBinding: {}}}\n"
        "stdout: out.bin\noutputs: {o: stdout}\n"
    )
    p = runner("--outdir", tmp_path / "out", binary)
    assert p.returncode == 0 and (tmp_path / "out" / "out.bin").read_bytes() == blob, p
    container = tmp_path / "container.cwl"
    container.write_text(
        "cwlVersion: v1.2\nclass: CommandLineTool\nbaseCommand: 'true'\n"
        "requirements: {DockerRequirement: {dockerPull: debian:stable-slim}}\ninputs: []\noutputs: []\n"
    )
    p = runner("--outdir", tmp_path, container)
    if cwl_runner.containers() == ["--no-container"]:  # the runner's own 33: no container runtime here
        assert p.returncode == 33 and "DockerRequirement" in p.stderr and "Traceback" not in p.stderr, p
    else:  # in a container of the image
        assert p.returncode == 0, p
    wrong = tmp_path / "wrong.cwl"
    wrong.write_text("cwlVersion: v1.2\nclass: Nonsense\n")
    p = runner("--outdir", tmp_path, wrong)
    assert p.returncode == 1 and "Nonsense" in p.stderr and "Traceback" not in p.stderr, p
    p = runner("--outdir", tmp_path, tmp_path / "missing.cwl")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p


# Who runs the runner: the tool's grandparent (cwltool's parent), its command line; after a pause.
WHO = r"""cwlVersion: v1.2
class: CommandLineTool
requirements: {InlineJavascriptRequirement: {}}
inputs: {seconds: int}
baseCommand: [sh, -c, 'sleep "$0"; gp=$(cut -d" " -f4 /proc/$PPID/stat); tr "\0" " " < /proc/$gp/cmdline']
arguments: ["$(inputs.seconds)"]
stdout: who.txt
outputs:
  who: {type: string, outputBinding: {glob: who.txt, loadContents: true, outputEval: "$(self[0].contents)"}}
"""


@pytest.mark.parametrize("warm", [True, False])
def test_the_runners_jobs_are_forked_from_its_warm_fork_server_and_end_as_started_ones(tmp_path, warm):
    """By default the endpoint's cwltool runs each job in a child of its fork server (cwltool and the
    CWL schema loaded once); without one (``cwl_runner_forks=[]``), in a fresh interpreter under the
    job wrapper. Either way the job's outputs are collected and a kill ends it."""
    import time

    from mpiws.jobs import Program
    from mpiws.service.serve import Server
    from mpiws.workflow.cwl.whole import tool_spec

    doc = tmp_path / "who.cwl"
    doc.write_text(WHO)
    server = Server({}, cwl_programs=[tool_spec(f"who={doc}")], **({} if warm else {"cwl_runner_forks": []}))
    try:
        who = Program(server.url + "/programs/who", key=server.key)
        job = who.spawn(seconds=0)
        assert job.wait(120)["state"] == "done", job.results()
        parent = job.results()["outputs"]["who"]
        assert ("-m mpiws.service.cwl_runner" in parent) == warm and ("mpiws-job" in parent) != warm, parent
        slow = who.spawn(seconds=120)
        deadline = time.monotonic() + 60
        while slow.status()["state"] != "running" and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # cwltool has started the tool
        began = time.monotonic()
        slow.kill()
        assert slow.wait(30)["state"] == "killed"
        assert time.monotonic() - began < 15, "a kill ends the runner's process group at once"
    finally:
        server.stop()


def test_a_users_warm_runner_packs_and_forks_the_next_runs_and_ends_with_its_socket(tmp_path, monkeypatch):
    """The first run starts the user's warm runner (and forks its jobs from itself); later runs have it
    pack the document and fork their jobs, with the same outputs and exits; it ends when its socket is
    removed; it is not started where it is turned off or its directory is not private."""
    import os
    import time

    from mpiws.workflow.cwl import warm

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    env = dict(os.environ)
    doc, job = tmp_path / "who.cwl", tmp_path / "job.yml"
    doc.write_text(WHO)
    job.write_text("seconds: 0\n")

    def who(**more):
        p = subprocess.run(
            [RUNNER, "--quiet", f"--outdir={tmp_path / 'out'}", doc, job],
            capture_output=True,
            text=True,
            timeout=120,
            env=dict(env, **more),
        )
        assert p.returncode == 0, p.stderr[-3000:]
        return json.loads(p.stdout)["who"]

    first = who()  # forked from the run itself, or by the runner it started if that was warm in time
    assert "mpiws-cwl-runner" in first or "-m mpiws.workflow.cwl.whole" in first, first
    sockets = lambda: list((run / "mpiws").glob("cwl-*.sock"))  # noqa: E731
    deadline = time.monotonic() + 60
    while not sockets() and time.monotonic() < deadline:
        time.sleep(0.1)
    (socket_path,) = sockets()
    assert warm.socket_path() == str(socket_path), "named by the interpreter and the versions"
    time.sleep(0.5)  # it listens once warm
    assert "-m mpiws.workflow.cwl.whole" in who(), "forked by the warm runner"
    wrong = tmp_path / "wrong.cwl"
    wrong.write_text("cwlVersion: v1.2\nclass: Nonsense\n")
    p = subprocess.run([RUNNER, "--outdir", tmp_path, wrong], capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 1 and "Nonsense" in p.stderr and "Traceback" not in p.stderr, p

    def runners():
        return [q for q in Path("/proc").iterdir() if q.name.isdigit() and str(socket_path) in _cmdline(q)]

    assert runners(), "the runner (and, for a moment after a run, the fork session it served)"
    socket_path.unlink()
    deadline = time.monotonic() + 15
    while runners() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not runners(), "it ends with its socket"

    assert "mpiws-cwl-runner" in who(MPIWS_CWL_WARM="0") and not sockets(), "turned off: none started"
    (run / "mpiws").chmod(0o755)
    assert "mpiws-cwl-runner" in who() and not sockets(), "a directory others may enter: none started"


def _cmdline(proc):
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


SUITE = ROOT / "tests" / "cwl" / "v1.2" / "tests"


def as_compared(v):
    """An output value as two runners must agree on it: each File's and Directory's name, the last
    segment of its location (two outputs of one file are one file), size, checksum, listing and
    secondary files; everything else as it is."""
    if isinstance(v, list):
        return [as_compared(x) for x in v]
    if isinstance(v, dict) and v.get("class") in ("File", "Directory"):
        keep = {k: v[k] for k in ("class", "basename", "size", "checksum") if k in v}
        keep["at"] = v["location"].rsplit("/", 1)[-1]
        for k in ("listing", "secondaryFiles"):
            if k in v:
                keep[k] = sorted((as_compared(x) for x in v[k]), key=json.dumps)
        return keep
    if isinstance(v, dict):
        return {k: as_compared(x) for k, x in v.items()}
    return v


@pytest.mark.parametrize(
    "document, job",
    [
        # a secondary Directory the job names differently from its location, beside a primary in another directory
        ("dir4.cwl", "dir4-subdir-1-job.yml"),
        # a Directory and a File the document names, staged by InitialWorkDirRequirement (the runner links them)
        ("iwd/iwd-fileobjs1.cwl", None),
        # an output's secondaryFiles pattern (.fai) is not the input's: ref.fasta.fai stays where it is
        ("initialworkdir-glob-fullpath.cwl", "initialworkdirrequirement-docker-out-job.json"),
        # two outputs of one file updated in place are one file
        ("inpdir_update_wf.cwl", "empty.json"),
        # a tool whose output has its input's name, in a file of its own (packing must keep both)
        ("iwd/iwd-subdir-wf.cwl", "iwd/iwd-subdir-job.yml"),
    ],
)
def test_documents_of_the_cwl_suite_give_cwltools_outputs(tmp_path, document, job):
    args = [SUITE / document] + ([SUITE / job] if job else [])
    p = runner(f"--outdir={tmp_path / 'mpiws'}", "--quiet", *args)
    assert p.returncode == 0, p.stderr[-3000:]
    ours = json.loads(p.stdout)
    assert as_compared(ours) == as_compared(cwltool("--outdir", tmp_path / "ref", *args))


def test_a_steps_secondary_files_do_not_travel_with_the_workflows_inputs(tmp_path):
    # The workflow's input declares none; its step's tool does: the files beside the job's are not
    # the workflow's to bring, so the step lacks them and the run fails, as cwltool's does.
    args = [SUITE / "record-in-secondaryFiles-missing-wf.cwl", SUITE / "record-secondaryFiles-job.yml"]
    p = runner(f"--outdir={tmp_path}", "--quiet", *args)
    assert p.returncode == 1 and "A.s2" in p.stderr, p
    ref = subprocess.run([sys.executable, "-c", "import sys, cwltool.main; sys.exit(cwltool.main.main())",  # its status
                          "--quiet", "--no-container", "--outdir", tmp_path, *args],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert ref.returncode == 1 and "A.s2" in ref.stderr


def test_version_and_help():
    p = runner("--version")
    assert p.returncode == 0 and p.stdout.startswith("mpiws-cwl-runner "), p
    assert "--outdir" in runner("--help").stdout


def test_an_endpoint_serves_any_cwl_document_through_its_runner_and_keeps_clients_inside_the_rules(tmp_path):
    """``mpiws serve --program-cwl flow.cwl`` of a document its own engine does not run: deployed packed,
    each job one run of the endpoint's CWL runner. A document reaching outside itself is refused at deploy;
    a job object naming ``cwl:requirements`` or ``$include`` (the client's code, the endpoint's files) at spawn."""
    from mpiws.jobs import Program
    from mpiws.service.serve import Server
    from mpiws.workflow.cwl.whole import tool_spec

    flow = tmp_path / "nested.cwl"
    flow.write_text(NESTED)
    server = Server({}, cwl_programs=[tool_spec(f"count={flow}")])
    try:
        count = Program(server.url + "/programs/count", key=server.key)
        assert count.usage()["class"] == "Workflow"
        job = count.spawn(text={"class": "File", "contents": "a\nb\n", "basename": "t.txt"})
        assert job.wait(120)["state"] == "done", job.results()
        assert job.results()["outputs"] == {"count": 4}
        for bad in (
            {"cwl:requirements": [{"class": "EnvVarRequirement", "envDef": {}}]},
            {"x": {"$include": "/etc/passwd"}},
        ):
            with pytest.raises(Exception, match="not an input's name"):
                count.spawn(text={"class": "File", "contents": "a\n"}, **bad)
        leak = {
            "cwlVersion": "v1.2",
            "class": "ExpressionTool",
            "inputs": [{"id": "f", "type": "File", "default": {"class": "File", "location": "file:///etc/passwd"}}],
            "outputs": [],
            "expression": "${return {};}",
        }
        with pytest.raises(Exception, match="reaches outside the document"):
            server.endpoint.deploy_program_cwl("leak", json.dumps(leak))
    finally:
        server.stop()
