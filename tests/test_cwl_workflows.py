"""CWL v1.2 documents run by ``mpiws workflow run`` give the outputs cwltool
(the reference runner) gives on the same inputs: the output object and its
files (class, basename, size, checksum, values; not where they lie). Steps
run as mpiws jobs, on the run's own endpoint or, by a flag or a hint, on
another endpoint process; failures say what and where."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import mpiws_serve

from mpiws.workflow.cwl import CwlError
from mpiws.workflow.cwl import run as cwl_run
from mpiws.workflow.cwl.job import job_object

ROOT = Path(__file__).resolve().parent.parent
CWL = ROOT / "examples" / "workflows" / "cwl"
MPIWS = Path(sys.executable).parent / "mpiws"

pytest.importorskip("cwltool")

#: (document, job file): tools and workflows, each run by both runners.
CASES = [
    ("echo.cwl", None, ["message=hello"]),
    ("sort.cwl", "fruit.yml", []),
    ("wc.cwl", "fruit.yml", []),
    ("options.cwl", "options.yml", []),
    ("split.cwl", "split.yml", []),
    ("chain.cwl", "fruit.yml", []),
    ("scatter.cwl", "files.yml", []),
    ("merge.cwl", "merge.yml", []),
    ("when.cwl", "when.yml", []),
]


def norm(v):
    """An output object without locations and paths; listings in name order (cwltool keeps the disk's)."""
    if isinstance(v, list):
        return [norm(x) for x in v]
    if isinstance(v, dict):
        d = {k: norm(x) for k, x in v.items() if k not in ("location", "path")}
        if "listing" in d:
            d["listing"] = sorted(d["listing"], key=lambda x: x["basename"])
        return d
    return v


def cwltool(doc, job, args, outdir):
    """cwltool's output object (job given as a file; NAME=VALUE as --NAME VALUE)."""
    extra = [w for a in args for w in (f"--{a.partition('=')[0]}", a.partition("=")[2])]
    cmd = [sys.executable, "-m", "cwltool", "--quiet", "--no-container", "--outdir", str(outdir), str(CWL / doc)]
    cmd += [str(CWL / job)] if job else extra
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def mpiws(doc, job, args, outdir, *flags):
    cmd = [str(MPIWS), "workflow", "run", "-q", str(CWL / doc)] + ([str(CWL / job)] if job else []) + list(args)
    out = subprocess.run(cmd + ["--outdir", str(outdir), *flags], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def checked_files(v):
    """Every File of an output object is where it says, with its size and checksum."""
    import hashlib

    if isinstance(v, list):
        return all(checked_files(x) for x in v)
    if isinstance(v, dict) and v.get("class") == "File":
        data = Path(v["path"]).read_bytes()
        return len(data) == v["size"] and "sha1$" + hashlib.sha1(data).hexdigest() == v["checksum"]
    if isinstance(v, dict):
        return all(checked_files(x) for x in v.values())
    return True


@pytest.mark.parametrize("doc,job,args", CASES, ids=[c[0] for c in CASES])
def test_the_outputs_equal_cwltools(doc, job, args, tmp_path):
    want = cwltool(doc, job, args, tmp_path / "cwltool")
    got = mpiws(doc, job, args, tmp_path / "mpiws")
    assert norm(got) == norm(want)
    assert checked_files(got)
    assert all(str(tmp_path / "mpiws") in f["path"] for f in _files(got))


def _files(v):
    if isinstance(v, list):
        return [f for x in v for f in _files(x)]
    if isinstance(v, dict):
        return [v] if v.get("class") == "File" else [f for x in v.values() for f in _files(x)]
    return []


def test_the_run_record_and_conditions(tmp_path):
    job = job_object(str(CWL / "when.yml"))
    out, record = cwl_run(CWL / "when.cwl", job, outdir=str(tmp_path), progress=False, steps=True)
    assert out["sorted"] is None and out["capitals"]["basename"] == "fruit.upper.txt"
    assert out["counts"] == ["5\n"]  # more.txt is too short: its job never ran
    units = record["steps"]["count"]["units"]
    assert record["steps"]["count"]["width"] == 2 and units["1"].get("skipped") and "job" not in units["1"]
    assert record["steps"]["sort"]["units"]["0"]["skipped"] and "job" in record["steps"]["upper"]["units"]["0"]
    job["do_sort"] = True
    out, _ = cwl_run(CWL / "when.cwl", job, outdir=str(tmp_path / "again"), progress=False, steps=True)
    assert out["capitals"] is None and out["sorted"]["size"] == 27


def test_steps_on_another_endpoint_by_flag_and_by_hint(tmp_path):
    """sort runs on a second endpoint process: it pulls the capitals from the run's endpoint, and the
    run's endpoint pulls the sorted file from it (files by reference both ways)."""
    p, url = mpiws_serve(["--program-cwl", str(CWL / "sort.cwl"), "--fetch-allow", "127.0.0.1"])
    try:
        want = norm(cwltool("chain.cwl", "fruit.yml", [], tmp_path / "cwltool"))
        rec = tmp_path / "run.json"
        got = mpiws("chain.cwl", "fruit.yml", [], tmp_path / "flag", "--endpoint", f"sort={url}", "--record", str(rec))
        assert norm(got) == want
        steps = json.loads(rec.read_text())["steps"]
        assert steps["sort"]["endpoint"] == url and steps["sort"]["units"]["0"]["job"].startswith(url)
        assert steps["upper"]["endpoint"] == "local"
        # The same by a hint in the document.
        doc = yaml.safe_load((CWL / "chain.cwl").read_text())
        doc["$namespaces"] = {"mpiws": "https://mpiws.org/cwl#"}
        doc["steps"]["sort"]["hints"] = [{"class": "mpiws:Endpoint", "url": url}]
        for name in ("upper.cwl", "sort.cwl", "wc.cwl"):
            shutil.copy(CWL / name, tmp_path / name)
        (tmp_path / "hinted.cwl").write_text(yaml.safe_dump(doc))
        job = job_object(str(CWL / "fruit.yml"))
        out, record = cwl_run(tmp_path / "hinted.cwl", job, outdir=str(tmp_path / "hint"), progress=False)
        assert norm(out) == want and record["steps"]["sort"]["units"]["0"]["job"].startswith(url)
    finally:
        p.kill()
        p.wait()


def test_failures_say_what_and_where(tmp_path):
    def fails(*args, code=1):
        """A wrong document or job, or a failed step: exit 1; a feature mpiws does not run: 33 (CWL's convention)."""
        out = subprocess.run(
            [str(MPIWS), "workflow", "run", "-q", *map(str, args), "--outdir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == code and out.stdout == "", out
        return out.stderr

    def runs(*args):
        """What mpiws's own step engine does not run runs whole, by the endpoint's CWL runner: its output object."""
        out = subprocess.run(
            [str(MPIWS), "workflow", "run", *map(str, args), "--outdir", str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out
        return json.loads(out.stdout), out.stderr

    assert "Missing required input parameter 'text'" in fails(CWL / "chain.cwl")  # cwltool's words: run whole
    assert "missing input 'text' of chain" in fails(CWL / "chain.cwl", "--steps")  # the step engine's
    assert runs(CWL / "js.cwl", "n=1")[0] == {}
    err = fails(CWL / "fail.cwl", "what=widgets")
    assert "step fail failed: fail exited with status 1" in err and "cannot frobnicate widgets" in err
    doc = yaml.safe_load((CWL / "scatter.cwl").read_text())
    doc["steps"]["label"]["scatterMethod"] = "flat_crossproduct"
    for name in ("echo.cwl", "label.cwl", "cat.cwl"):
        shutil.copy(CWL / name, tmp_path / name)
    (tmp_path / "cross.cwl").write_text(yaml.safe_dump(doc))
    crossed, _ = runs(tmp_path / "cross.cwl", CWL / "files.yml")
    assert norm(crossed) == norm(cwltool(tmp_path / "cross.cwl", "files.yml", [], tmp_path / "ref"))
    doc = yaml.safe_load((CWL / "when.cwl").read_text())
    doc["steps"]["sort"]["when"] = "$(inputs.do_sort && inputs.text.size > 1)"
    for name in ("sort.cwl", "upper.cwl", "wc.cwl"):
        shutil.copy(CWL / name, tmp_path / name)
    (tmp_path / "js_when.cwl").write_text(yaml.safe_dump(doc))
    out, _ = runs(tmp_path / "js_when.cwl", CWL / "when.yml")  # whole, by cwltool, as cwltool runs it
    assert norm(out) == norm(cwltool(tmp_path / "js_when.cwl", "when.yml", [], tmp_path / "ref2"))
    err = fails(tmp_path / "js_when.cwl", CWL / "when.yml", "--steps", code=33)  # the step engine's own limits
    assert "step sort: when" in err and "without JavaScript" in err
    with pytest.raises(CwlError, match="no input colour"):
        cwl_run(CWL / "sort.cwl", {"colour": "red"}, outdir=str(tmp_path), progress=False, named=["colour"])
    assert "has no input colour" in fails(CWL / "sort.cwl", "colour=red")
