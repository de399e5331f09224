"""Values of a CWL run at its edges: the job object from a job file (Files
and Directories relative to it), values as a job's spawn request carries
them (local files uploaded to the job's endpoint once; other jobs' files by
their URL: endpoint to endpoint), and the final output object, its files
downloaded into ``--outdir`` with their checksums, as cwltool reports it."""

import os
import shutil
from urllib.parse import unquote

from ...jobs import download
from ..values import file_object
from .load import CwlError


def _names(basename):
    root, dot, ext = basename.rpartition(".")
    return (root, dot + ext) if root else (basename, "")


def local(kind, path):
    """A File or Directory of this machine, as the runner holds it."""
    path = os.path.abspath(path)
    if not (os.path.isfile(path) if kind == "File" else os.path.isdir(path)):
        raise CwlError(f"no {kind.lower()} {path}")
    basename = os.path.basename(path)
    root, ext = _names(basename)
    v = {
        "class": kind,
        "path": path,
        "location": "file://" + path,
        "basename": basename,
        "nameroot": root,
        "nameext": ext,
    }
    if kind == "File":
        v["size"] = os.path.getsize(path)
    return v


def from_file(v, base):
    """A job file's value with its Files and Directories made local objects (paths relative to ``base``)."""
    if isinstance(v, list):
        return [from_file(x, base) for x in v]
    if isinstance(v, dict) and v.get("class") in ("File", "Directory"):
        return dict(_described(v, base), **_beside(v, base))
    if isinstance(v, dict):
        return {k: from_file(x, base) for k, x in v.items()}
    return v


def _described(v, base):
    if "contents" in v and v["class"] == "File":
        return {"class": "File", "contents": v["contents"], "basename": v.get("basename", "contents")}
    where = v.get("path") or (v.get("location") and unquote(v["location"]))  # a location is a URI
    if not where and v["class"] == "Directory" and "listing" in v:  # a literal: its listing
        return {"class": "Directory", "basename": v.get("basename", "dir"), "listing": from_file(v["listing"], base)}
    if not where:
        raise CwlError(f"a {v['class']} in the job has no path or location")
    if where.startswith(("http://", "https://")):
        return dict(v, location=where, basename=v.get("basename") or where.rstrip("/").rsplit("/", 1)[-1])
    where = where[len("file://") :] if where.startswith("file://") else where
    out = local(v["class"], os.path.join(base, where))
    if isinstance(v.get("basename"), str):  # the name the job gives it, where it differs from the file's
        out["basename"] = v["basename"]
        out["nameroot"], out["nameext"] = _names(v["basename"])
    return out


def _beside(v, base):
    """What a File or Directory of a job carries besides itself: its format, its secondary files."""
    out = {"format": v["format"]} if isinstance(v.get("format"), str) else {}
    if isinstance(v.get("secondaryFiles"), list):
        out["secondaryFiles"] = from_file(v["secondaryFiles"], base)
    return out


def job_object(path=None, args=()):
    """The job object: a job file's (YAML or JSON), then ``NAME=VALUE`` (JSON, else text) and ``NAME:@PATH`` (a File)."""
    import json

    import yaml

    given = {}
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                doc = yaml.safe_load(f) or {}
        except OSError as e:
            raise CwlError(f"{path}: {e.strerror}") from None
        if not isinstance(doc, dict):
            raise CwlError(f"{path}: a job file maps input names to values")
        given = from_file(doc, os.path.dirname(os.path.abspath(path)))
    for a in args:
        name, sep, text = split_input(a)
        if sep == ":@":
            given[name] = local("File", text)
            continue
        if not sep:
            raise CwlError(f"an input is NAME=VALUE or NAME:@PATH, not {a!r}")
        try:
            given[name] = json.loads(text)
        except ValueError:
            given[name] = text
    return given


def split_input(a):
    """A command line's input, ``NAME=VALUE`` or ``NAME:@PATH``: (name, ``=`` or ``:@``, the rest)
    by whichever comes first; ("", "", ``a``) for neither."""
    if ":@" in a and ("=" not in a or a.index(":@") < a.index("=")):
        return a.partition(":@")
    name, sep, text = a.partition("=")
    return (name, sep, text) if sep else ("", "", a)


class Wire:
    """Values as a job's spawn request carries them: local files uploaded (once per endpoint)."""

    def __init__(self, upload):
        self.upload = upload  # (endpoint, path) -> URL: the run's (programs.Jobs.upload), removed at its end
        self.uploaded = {}

    def value(self, v, endpoint):
        if isinstance(v, list):
            return [self.value(x, endpoint) for x in v]
        if not isinstance(v, dict):
            return v
        cls = v.get("class")
        if cls == "File":
            return dict(self._file(v, endpoint), **self._beside(v, endpoint))
        if cls == "Directory":
            if "path" in v:
                listing = [
                    local("Directory" if os.path.isdir(p) else "File", p)
                    for p in (os.path.join(v["path"], n) for n in sorted(os.listdir(v["path"])))
                    if os.path.isdir(p) or os.path.isfile(p)
                ]
            else:
                listing = v.get("listing", [])
            # A directory of this machine keeps its location beside its listing: the endpoint's CWL
            # runner then takes it as a directory (listed as `loadListing` says), not as a literal.
            where = {"location": v["location"]} if "path" in v else {}
            return {
                "class": "Directory",
                "basename": v["basename"],
                "listing": [self.value(x, endpoint) for x in listing],
                **where,
            }
        return {k: self.value(x, endpoint) for k, x in v.items()}

    def _file(self, v, endpoint):
        if "contents" in v and "path" not in v and "location" not in v:
            return {"class": "File", "contents": v["contents"], "basename": v["basename"]}
        if "path" in v:  # local: uploaded to the job's endpoint
            k = (endpoint, v["path"])
            if k not in self.uploaded:
                self.uploaded[k] = self.upload(endpoint, v["path"])
            return {"class": "File", "location": self.uploaded[k], "basename": v["basename"]}
        return {"class": "File", "location": v["location"], "basename": v["basename"]}  # by reference

    def _beside(self, v, endpoint):
        out = {"format": v["format"]} if isinstance(v.get("format"), str) else {}
        if v.get("secondaryFiles"):
            out["secondaryFiles"] = self.value(v["secondaryFiles"], endpoint)
        return out


def final(v, outdir, taken=None):
    """The output object for the client: files of endpoints downloaded into ``outdir``
    (a name another output of the run took gets ``_2``, ``_3``... after it, as cwltool
    does; its basename stays; a file two outputs report is fetched once), each with its
    checksum. ``taken`` maps each path given so far to what it holds."""
    taken = {} if taken is None else taken
    if isinstance(v, list):
        return [final(x, outdir, taken) for x in v]
    if not isinstance(v, dict):
        return v
    cls = v.get("class")
    if cls not in ("File", "Directory"):
        return {k: final(x, outdir, taken) for k, x in v.items()}
    os.makedirs(outdir, exist_ok=True)
    source = v.get("location") or v.get("path")
    dest, fresh = _free(os.path.join(outdir, v["basename"]), taken, source)
    if cls == "Directory":
        shutil.rmtree(dest, ignore_errors=True)  # a run's output replaces an earlier run's, as a file does
        os.makedirs(dest)
        listing = v.get("listing")
        if listing is None and "path" in v:
            listing = [
                local("Directory" if os.path.isdir(p) else "File", p)
                for p in (os.path.join(v["path"], n) for n in sorted(os.listdir(v["path"])))
            ]
        inner = {}
        items = [final(x, dest, inner) for x in listing or []]
        path = os.path.abspath(dest)
        return {
            "class": "Directory",
            "location": "file://" + path,
            "basename": v["basename"],
            "listing": items,
            "path": path,
        }
    if not fresh:
        pass  # another output's, already here
    elif "path" in v:
        shutil.copyfile(v["path"], dest)
    elif "contents" in v and "location" not in v:
        with open(dest, "w", encoding="utf-8") as f:
            f.write(v["contents"])
    else:
        download(v["location"], dest)
    obj = file_object(dest)
    out = {
        "location": obj["location"],
        "basename": v["basename"],
        "class": "File",
        "checksum": obj["checksum"],
        "size": obj["size"],
        "path": obj["path"],
    }
    if "contents" in v:
        out["contents"] = v["contents"]
    if "format" in v:
        out["format"] = v["format"]
    if v.get("secondaryFiles"):
        out["secondaryFiles"] = final(v["secondaryFiles"], outdir, taken)
    return out


def _free(path, taken, source):
    """(``path``, or the first of ``path_2``, ``path_3``... not taken, True), or (the path ``source``
    was given, False) when it has one: an output that two outputs report (an in-place update) is one file."""
    base, n = path, 1
    while path in taken:
        if source is not None and taken[path] == source:
            return path, False
        n += 1
        path = f"{base}_{n}"
    taken[path] = source
    return path, True
