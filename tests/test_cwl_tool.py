"""CWL CommandLineTools deployed as programs (``mpiws serve --program-cwl``):
the endpoint builds each job's command line from the tool document, stages
File and Directory inputs, and answers the CWL output object (files by
URL, with checksums); what the document does not allow is refused."""

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import mpiws_serve

from mpiws import _core
from mpiws.jobs import Program, download, upload
from mpiws.service.serve import Server
from mpiws.workflow.cwl.whole import tool_spec

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "examples" / "workflows" / "cwl"
MPIWS = Path(sys.executable).parent / "mpiws"

LEAK = {
    "cwlVersion": "v1.2",
    "class": "CommandLineTool",
    "baseCommand": ["ln", "-s", "/etc/passwd", "leak.txt"],
    "inputs": {},
    "outputs": {
        "leak": {"type": "File?", "outputBinding": {"glob": "leak.txt"}},
        "all": {"type": "File[]", "outputBinding": {"glob": "*"}},
    },
}


def sha1(data):
    return "sha1$" + hashlib.sha1(data).hexdigest()


@pytest.fixture(scope="module")
def endpoint():
    tools = [tool_spec(str(TOOLS / f"{n}.cwl")) for n in ("sort", "wc", "split", "echo", "fail", "options", "cat")]
    s = Server({}, cwl_programs=tools + [("leak", LEAK)])
    yield s
    s.stop()


def program(endpoint, name):
    return Program(f"{endpoint.url}/programs/{name}")


def ended(job):
    status = job.wait(timeout=60)
    assert status["state"] in ("done", "failed"), status
    return status, job.results()


def error_of(call):
    with pytest.raises(Exception) as e:
        call()
    return str(e.value)


def test_a_job_of_a_tool_gives_the_cwl_output_object(endpoint):
    job = program(endpoint, "sort").spawn(
        text={"class": "File", "contents": "pear\napple\nfig\n", "basename": "f.txt"}, reverse=True
    )
    status, results = ended(job)
    assert status["state"] == "done" and status["exit_code"] == 0
    out = results["outputs"]["sorted"]
    assert {k: out[k] for k in ("class", "basename", "nameroot", "nameext", "size", "checksum")} == {
        "class": "File",
        "basename": "sorted.txt",
        "nameroot": "sorted",
        "nameext": ".txt",
        "size": 15,
        "checksum": sha1(b"pear\nfig\napple\n"),
    }
    assert out["location"] == f"{job.url}/files/sorted.txt"
    # An output passes on by reference: a job of another tool takes its URL (here: the same endpoint, copied from disk).
    count = program(endpoint, "wc").spawn(text={"class": "File", "location": out["location"]})
    status, results = ended(count)
    assert results["outputs"]["count"].strip() == "3"
    assert results["outputs"]["count_file"]["checksum"] == sha1(b"3\n")


def test_globs_directories_and_nested_file_urls(endpoint, tmp_path):
    job = program(endpoint, "split").spawn(
        lines=2, text={"class": "File", "contents": "a\nb\nc\nd\ne\n", "basename": "my text.txt"}
    )
    status, results = ended(job)
    assert status["state"] == "done", results
    o = results["outputs"]
    assert [p["basename"] for p in o["parts"]] == ["part-aa", "part-ab", "part-ac"]
    assert [p["checksum"] for p in o["parts"]] == [sha1(b"a\nb\n"), sha1(b"c\nd\n"), sha1(b"e\n")]
    assert o["bundle"]["class"] == "Directory"
    listing = {e["basename"]: e for e in o["bundle"]["listing"]}
    assert set(listing) == {"copies", "my text.txt"}
    again = listing["copies"]["listing"][0]
    assert again["basename"] == "again.txt" and again["location"].endswith("/files/bundle/copies/again.txt")
    assert o["first"]["location"].endswith("/files/bundle/my%20text.txt")  # a glob with a reference, its name encoded
    download(o["first"]["location"], tmp_path / "first")
    assert (tmp_path / "first").read_bytes() == b"a\nb\nc\nd\ne\n"
    # A Directory input: its listing staged, its files from other jobs' URLs.
    d = {
        "class": "Directory",
        "basename": "parts",
        "listing": [{"class": "File", "location": p["location"]} for p in o["parts"]],
    }
    whole = program(endpoint, "cat").spawn(files=[{"class": "File", "location": p["location"]} for p in o["parts"]])
    assert ended(whole)[1]["outputs"]["all"]["checksum"] == sha1(b"a\nb\nc\nd\ne\n")
    assert "Directory" in error_of(lambda: program(endpoint, "cat").spawn(files=d))


def test_the_inputs_become_the_command_line_cwltool_builds(endpoint, tmp_path):
    job = program(endpoint, "options").spawn(
        name="run1",
        verbose=True,
        tags=["a", "b"],
        keys=["k1", "k2"],
        csv=[1, 2, 3],
        mode="slow",
        ratio=0.5,
        data={"class": "File", "contents": "x", "basename": "fruit.txt"},
    )
    _status, results = ended(job)
    download(results["outputs"]["line"]["location"], tmp_path / "line")
    # cwltool 3.3 builds the same from examples/workflows/cwl/options.yml (tests/test_cwl_workflows.py compares them)
    assert (
        (tmp_path / "line").read_text()
        == "-- --mode slow -v run1 -n 2 --ratio 0.5 --tags a b --csv=1,2,3 -k k1 -k k2 -o=run1.out fruit.txt\n"
    )


def test_wrong_inputs_are_refused_at_spawn(endpoint):
    sort = program(endpoint, "sort")
    text = {"class": "File", "contents": "x"}
    assert "missing input 'text' (inputs: reverse, text)" in error_of(lambda: sort.spawn())
    assert "no input 'colour'" in error_of(lambda: sort.spawn(text=text, colour="red"))
    assert "input 'reverse' must be \"boolean\"" in error_of(lambda: sort.spawn(text=text, reverse="yes"))
    assert "not a plain file name" in error_of(
        lambda: sort.spawn(text={"class": "File", "contents": "x", "basename": "../x"})
    )
    assert "location" in error_of(lambda: sort.spawn(text={"class": "File", "path": "/etc/passwd"}))
    assert "file:///etc/passwd" in error_of(
        lambda: sort.spawn(text={"class": "File", "location": "file:///etc/passwd"})
    )
    assert "allow" in error_of(lambda: sort.spawn(text={"class": "File", "location": "http://127.0.0.1:1/x"}))


def test_a_value_that_would_be_an_option_fails_the_job(endpoint):
    status, _ = ended(program(endpoint, "echo").spawn(message="--help"))
    assert status["state"] == "failed" and "dashOk" in status["error"], status


def test_a_failing_tool_fails_its_job_with_its_stderr(endpoint, tmp_path):
    job = program(endpoint, "fail").spawn(what="widgets")
    status, results = ended(job)
    assert (status["state"], status["exit_code"]) == ("failed", 1)
    assert "exited with status 1" in status["error"] and results["outputs"] == {}
    assert job.download("stderr", tmp_path / "err") and (tmp_path / "err").read_text() == "cannot frobnicate widgets\n"


def test_a_symlink_out_of_the_job_is_never_an_output(endpoint):
    job = program(endpoint, "leak").spawn()
    status, results = ended(job)
    assert status["state"] == "done" and results["outputs"] == {"leak": None, "all": []}
    assert "no file" in error_of(lambda: download(f"{job.url}/files/leak.txt", "/dev/null"))
    for bad in ("files/..%2F..%2Fetc%2Fpasswd", "files/../stdout", "files/%2e%2e/x"):
        assert error_of(lambda bad=bad: download(f"{job.url}/{bad}", "/dev/null"))


def test_serve_program_cwl_usage_and_call(tmp_path):
    p, url = mpiws_serve(["--program-cwl", str(TOOLS / "wc.cwl"), "--program-cwl", f"srt={TOOLS / 'sort.cwl'}"])
    try:
        usage = subprocess.run(
            [str(MPIWS), "usage", f"{url}/programs/srt"], capture_output=True, text=True, check=True
        ).stdout
        assert "CWL CommandLineTool running sort" in usage
        assert re.search(r"reverse\s+in\s+boolean \(default false\)", usage) and re.search(
            r"sorted\s+out\s+File", usage
        )
        described = Program(f"{url}/programs/wc").usage()
        assert described["inputs"] == [{"name": "text", "type": "File"}]
        assert {o["name"]: o["type"] for o in described["outputs"]} == {"count": "string", "count_file": "File"}
        (tmp_path / "t.txt").write_text("1\n2\n")
        up = upload(url, tmp_path / "t.txt")
        res = Program(f"{url}/programs/wc").call(text={"class": "File", "location": up["url"], "basename": "t.txt"})
        assert res["state"] == "done" and res["outputs"]["count"] == "2\n"
    finally:
        p.kill()
        p.wait()


def test_a_tool_mpiws_cannot_run_is_refused_at_deploy_by_name_without_a_cwl_runner():
    out = subprocess.run(
        [str(MPIWS), "serve", "--cwl-runner", "none", "--program-cwl", str(TOOLS / "js.cwl")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode != 0
    assert "requirement InlineJavascriptRequirement is not supported" in out.stderr, out.stderr
    # With its CWL runner (cwltool, the default where it is installed) the endpoint serves it.
    with subprocess.Popen(
        [str(MPIWS), "serve", "--program-cwl", str(TOOLS / "js.cwl")], stdout=subprocess.PIPE, text=True
    ) as p:
        try:
            assert "serving CWL program js at http" in p.stdout.readline()
        finally:
            p.terminate()
    ep = _core.Endpoint("127.0.0.1", 0)
    with pytest.raises(Exception, match="ShellCommandRequirement"):
        ep.deploy_program_cwl("x", json.dumps(dict(LEAK, requirements=[{"class": "ShellCommandRequirement"}])))
    with pytest.raises(Exception, match="record types are not supported"):
        ep.deploy_program_cwl("x", json.dumps(dict(LEAK, inputs={"r": {"type": "record", "fields": []}})))
    ep.close()


def test_parameter_references_evaluate_without_javascript():
    ctx = json.dumps({"inputs": {"f": {"basename": "a.txt"}, "n": 3}, "self": None, "runtime": {}})
    assert json.loads(_core.cwl_eval("$(inputs.f.basename)", ctx)) == "a.txt"
    assert json.loads(_core.cwl_eval("$(inputs.n > 2)", ctx, True)) is True
    with pytest.raises(ValueError, match="JavaScript"):
        _core.cwl_eval("$(inputs.n > 2)", ctx)
