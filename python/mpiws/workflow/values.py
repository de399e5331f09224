"""Values at the edges of a workflow run: the client's inputs checked
against their declared types, files named by the client, the files and
values of the output object, and the bytes a value takes on the wire."""

import hashlib
import json
import os
import pickle
import shutil
from dataclasses import dataclass

from .spec import WorkflowError


@dataclass(frozen=True)
class LocalFile:
    """A file the client names (a ``file`` input): uploaded to a program's
    endpoint, or read and sent as bytes to a service."""

    path: str

    def read(self):
        with open(self.path, "rb") as f:
            return f.read()


@dataclass(frozen=True)
class Ref:
    """A file on an endpoint, by reference: a job's output (its URL and size; ``session``: the
    session's URL and the file's name there, if the job ran in one)."""

    url: str
    size: int = -1
    session: tuple = None


def nbytes(v):
    """About how many bytes ``v`` takes in a message: its buffers' bytes, or its pickle's."""
    if isinstance(v, (bytes, bytearray)):
        return len(v)
    if isinstance(v, memoryview):
        return v.nbytes
    n = getattr(v, "nbytes", None)
    if isinstance(n, int) and hasattr(v, "dtype"):
        return n
    buffers = []
    data = pickle.dumps(v, protocol=5, buffer_callback=buffers.append)
    return len(data) + sum(b.raw().nbytes for b in buffers)


_SCALARS = {"int": int, "float": float, "string": str, "boolean": bool}


def bind(wf, given):
    """The workflow's inputs from what the client ``given`` (name -> value; a
    ``LocalFile`` for a file): defaults filled in, every input present, types checked."""
    unknown = sorted(set(given) - set(wf.inputs))
    if unknown:
        raise WorkflowError(
            f"workflow {wf.name} has no input {', '.join(unknown)} (inputs: {', '.join(wf.inputs) or 'none'})"
        )
    values = {}
    for name, spec in wf.inputs.items():
        if name in given:
            v = given[name]
        elif spec.has_default:
            v = spec.default
        else:
            raise WorkflowError(f"workflow {wf.name} needs input {name} ({spec.type})")
        values[name] = _check(v, spec.type, f"input {name}")
    return values


def _check(v, t, where):
    if t.endswith("[]"):
        if not isinstance(v, (list, tuple)):
            raise WorkflowError(f"{where}: a list ({t}) is needed, not {type(v).__name__}")
        return [_check(x, t[:-2], f"{where}[{i}]") for i, x in enumerate(v)]
    if t == "file":
        if isinstance(v, str):
            v = LocalFile(v)
        if not isinstance(v, LocalFile) or not os.path.isfile(v.path):
            raise WorkflowError(f"{where}: no file {getattr(v, 'path', v)!r}")
        return LocalFile(os.path.abspath(v.path))
    if t == "bytes":
        if isinstance(v, LocalFile):
            return v.read()
        if isinstance(v, str):
            return v.encode()
        if not isinstance(v, (bytes, bytearray)):
            raise WorkflowError(f"{where}: bytes (or a file, NAME:@PATH) are needed, not {type(v).__name__}")
        return bytes(v)
    if t in _SCALARS:
        want = _SCALARS[t]
        if t == "float" and isinstance(v, int) and not isinstance(v, bool):
            return float(v)
        if isinstance(v, want) and not (t == "int" and isinstance(v, bool)):
            return v
        raise WorkflowError(f"{where}: {t} is needed, not {v!r}")
    return v  # any


def parse_text(text, t):
    """A value typed on the command line (``name=text``) as the input's type ``t``."""
    if t.endswith("[]"):
        try:
            v = json.loads(text)
        except ValueError:
            v = [x for x in text.split(",") if x != ""]
        if not isinstance(v, list):
            v = [v]
        return [parse_text(x, t[:-2]) if isinstance(x, str) else x for x in v]
    if t == "int":
        return _convert(int, text, t)
    if t == "float":
        return _convert(float, text, t)
    if t == "boolean":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise WorkflowError(f"{text!r} is not a boolean")
        return text.lower() in ("true", "1", "yes")
    if t == "file":
        return LocalFile(text)
    if t == "any":
        try:
            return json.loads(text)
        except ValueError:
            return text
    return text


def _convert(kind, text, t):
    try:
        return kind(text)
    except ValueError:
        raise WorkflowError(f"{text!r} is not a {t}") from None


def output_object(values, outdir):
    """The run's output object (JSON): plain values as they are, bytes and
    files as CWL-style File objects (saved in ``outdir``, with checksums)."""
    return {name: _output(name, v, outdir) for name, v in values.items()}


def _output(name, v, outdir):
    if isinstance(v, (list, tuple)):
        return [_output(f"{name}_{i}", x, outdir) for i, x in enumerate(v)]
    if isinstance(v, (bytes, bytearray, memoryview)):
        os.makedirs(outdir, exist_ok=True)
        path = os.path.join(outdir, name)
        with open(path, "wb") as f:
            f.write(v)
        return file_object(path)
    if isinstance(v, LocalFile):
        os.makedirs(outdir, exist_ok=True)
        path = os.path.join(outdir, name)
        if os.path.abspath(path) != os.path.abspath(v.path):
            shutil.copyfile(v.path, path)
        return file_object(path)
    if hasattr(v, "tolist") and hasattr(v, "dtype"):
        return v.tolist()
    try:
        json.dumps(v)
    except (TypeError, ValueError):
        return repr(v)
    return v


def file_object(path):
    """``{"class": "File", "location", "path", "basename", "checksum", "size"}`` as cwltool reports a file."""
    h, size = hashlib.sha1(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    path = os.path.abspath(path)
    return {
        "class": "File",
        "location": "file://" + path,
        "path": path,
        "basename": os.path.basename(path),
        "checksum": "sha1$" + h.hexdigest(),
        "size": size,
    }
