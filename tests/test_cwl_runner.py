"""mpiws-cwl-runner: the cwl-runner interface (what cwltest and users' scripts
call): the output object on stdout, exit 0; 33 for a feature mpiws does not
run (CWL's convention, so a test suite tells it from a wrong document); 1 for
a wrong document or job, or a failed step."""

import json
import subprocess
import sys
from pathlib import Path

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


def test_an_unsupported_feature_exits_33_and_a_wrong_document_1(tmp_path):
    expression = tmp_path / "expr.cwl"
    expression.write_text(
        "cwlVersion: v1.2\nclass: ExpressionTool\ninputs: []\noutputs: []\nexpression: '${return {};}'\n"
    )
    p = runner("--outdir", tmp_path, expression)
    assert p.returncode == 33 and "ExpressionTool" in p.stderr and "Traceback" not in p.stderr, p
    p = runner("--outdir", tmp_path, f"{EXAMPLES / 'chain.cwl'}#main")
    assert p.returncode == 33 and "#id" in p.stderr, p
    wrong = tmp_path / "wrong.cwl"
    wrong.write_text("cwlVersion: v1.2\nclass: Nonsense\n")
    p = runner("--outdir", tmp_path, wrong)
    assert p.returncode == 1 and "Nonsense" in p.stderr and "Traceback" not in p.stderr, p
    p = runner("--outdir", tmp_path, tmp_path / "missing.cwl")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p


def test_version_and_help():
    p = runner("--version")
    assert p.returncode == 0 and p.stdout.startswith("mpiws-cwl-runner "), p
    assert "--outdir" in runner("--help").stdout
