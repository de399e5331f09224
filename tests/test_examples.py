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
    for m in re.finditer(r"```python\n# run: mpiws run -n (\d+)\n(.*?)```", text, re.S):
        yield int(m.group(1)), m.group(2)


@pytest.mark.parametrize("n,code", list(guide_blocks()))
def test_guide_block(tmp_path, n, code):
    assert_ok(mpiws_run(n, code, tmp_path))


def test_guide_has_runnable_blocks():
    assert len(list(guide_blocks())) >= 5
