"""An endpoint's settings are declared once, in the core (``service::Config``):
``mpiws serve``'s limit options, the typed stub of ``_core.Endpoint`` and
docs/security.md's limits table name exactly those settings, with the
defaults the core reports; a misspelt setting is refused, naming the right ones."""

import ast
import json
import re
from pathlib import Path

import pytest

from mpiws import _core
from mpiws.cli import LIMITS, human

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = json.loads(_core.endpoint_settings())


def _name(flag):
    return flag[2:].replace("-", "_")


def test_every_limit_option_is_a_setting_and_every_numeric_setting_an_option():
    options = {_name(flag) for flag, _, _ in LIMITS}
    assert options <= set(SETTINGS), options - set(SETTINGS)
    numeric = {k for k, v in SETTINGS.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    assert numeric - {"port"} <= options | {"max_fetch"}, numeric - options
    assert "max_fetch" in options  # its default (None) is the upload limit


def test_the_stub_types_every_setting():
    tree = ast.parse((ROOT / "python/mpiws/_core.pyi").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Endpoint")
    init = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assert {a.arg for a in init.args.args[1:]} == set(SETTINGS)


def test_the_security_page_gives_each_limit_with_the_cores_default():
    text = (ROOT / "docs/security.md").read_text()
    table = text[text.index("## Limits") :]
    rows = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3:
            for flag in re.findall(r"`(--[a-z-]+)`", cells[2]):
                rows[flag] = cells[1]
    for flag, unit, _ in LIMITS:
        assert flag in rows, f"docs/security.md's limits table has no row for {flag}"
        shown = human(SETTINGS[_name(flag)], unit)
        assert shown in rows[flag].replace("`", ""), f"{flag}: the table says {rows[flag]!r}, the core {shown!r}"


def test_the_serve_help_shows_the_cores_defaults(capsys):
    from mpiws.cli import main

    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--max-message BYTES largest message body (default: 1 GiB)" in out
    assert "--job-ttl SECONDS an ended job or an upload is kept (default: 24 h)" in out


def test_a_misspelt_or_ill_typed_setting_is_refused_saying_which():
    with pytest.raises(Exception, match=r'"max_mesage" is not an endpoint setting .*max_message'):
        _core.Endpoint(max_mesage=5)
    with pytest.raises(Exception, match="max_message"):
        _core.Endpoint(max_message="big")
    e = _core.Endpoint(max_message=5, job_ttl=1.5, workdir=None)
    assert e.url.startswith("http://127.0.0.1:")
