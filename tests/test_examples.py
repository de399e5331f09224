"""The examples and the guide's runnable blocks run as documented."""

import re

import pytest

from conftest import ROOT, assert_ok, mpiws_run


@pytest.mark.parametrize("name,n,expect", [
    ("hello", 4, "Hello from rank 3 of 4"),
    ("ring", 4, "token came back after visiting 4 ranks: [0, 1, 2, 3]"),
    ("compute_pi", 3, "pi ~= 3.14159265"),
    ("pingpong", 2, "GB/s"),
])
def test_example(tmp_path, name, n, expect):
    p = mpiws_run(n, (ROOT / "examples" / f"{name}.py").read_text(), tmp_path)
    assert_ok(p)
    assert expect in p.stdout


def guide_blocks():
    text = (ROOT / "docs" / "guide.md").read_text()
    for m in re.finditer(r"```python\n# run: mpiws run -n (\d+)( --keep-going)?\n(.*?)```", text, re.S):
        yield int(m.group(1)), bool(m.group(2)), m.group(3)


@pytest.mark.parametrize("n,keep_going,code", list(guide_blocks()))
def test_guide_block(tmp_path, n, keep_going, code):
    p = mpiws_run(n, code, tmp_path, keep_going=keep_going)
    if not keep_going:
        assert_ok(p)
        return
    # the failure example: a rank dies, the others carry on to the end
    assert p.returncode != 0 and "failed first" in p.stderr, p.stderr
    survivors = {l.split("]")[0] for l in p.stdout.splitlines() if "survivors' sum: 1" in l}
    assert survivors == {"[0", "[1"}, p.stdout + p.stderr


def test_guide_has_runnable_blocks():
    assert len(list(guide_blocks())) >= 5
