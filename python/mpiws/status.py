"""``mpiws status``: what endpoints hold and do, on a terminal (as ``ray
status`` says it for a Ray cluster).

An endpoint's facts come from its own routes, with the client's key: ``GET
/`` (what it deploys; its domains and job count to a key with ``admin``) and
``GET /metrics`` (instances, jobs and sessions by state, disk, refusals by
limit; to a key with ``metrics`` or ``admin``: without one, those lines are
left out). ``mpiws serve`` notes each endpoint it starts in this user's
config directory (beside the key file), so that ``mpiws status`` with no URL
finds this user's endpoints on this machine; a note whose process is gone is
dropped.
"""

import json
import os
import time
from pathlib import Path

from .keys import key_file


def _notes():
    return key_file().parent / "endpoints"


def note_endpoint(url, **facts):
    """Note that this process serves ``url`` (``mpiws serve``): a private file named by its pid (the notes
    of endpoints gone are dropped first, so that they do not pile up)."""
    d = _notes()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    local_endpoints()
    path = d / f"{os.getpid()}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": url, "pid": os.getpid(), "started": time.time(), **facts}, f)


def _alive(pid):
    """Whether ``pid`` is still an mpiws endpoint's process (not another that took its number)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"mpiws" in cmdline and b"serve" in cmdline


def local_endpoints():
    """The notes of this user's endpoints still running here (the others are removed), oldest first."""
    found = []
    for path in sorted(_notes().glob("*.json")) if _notes().is_dir() else []:
        try:
            note = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _alive(note.get("pid")):
            found.append(note)
        else:
            path.unlink(missing_ok=True)
    return sorted(found, key=lambda n: n["started"])


def metrics_of(text):
    """A Prometheus exposition's samples: (name, {label: value}, value)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series, _, value = line.rpartition(" ")
        name, _, labels = series.partition("{")
        pairs = dict(p.split("=", 1) for p in labels.rstrip("}").split(",") if "=" in p)
        out.append((name, {k: v.strip('"') for k, v in pairs.items()}, float(value)))
    return out


def _by(samples, name, label):
    return {labels[label]: v for n, labels, v in samples if n == name and label in labels and v}


def _count(counts):
    return ", ".join(f"{int(v)} {k}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none"


def _size(n):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{int(n)} B"


def report(url, described, metrics=None, note=None):
    """The lines ``mpiws status`` prints for one endpoint."""
    head = f"{url} (mpiws {described.get('mpiws', '?')}"
    if note:
        head += f", pid {note['pid']}, up {_since(note['started'])}"
    lines = [head + ")"]
    rows = [
        ("services", ", ".join(described.get("services", [])) or "none"),
        ("programs", ", ".join(described.get("programs", [])) or "none"),
    ]
    if metrics is not None:
        s = metrics_of(metrics)
        single = {n: v for n, labels, v in s if not labels}
        rows += [
            ("instances", _count(_by(s, "mpiws_instances", "state"))),
            ("jobs", _count(_by(s, "mpiws_jobs", "state"))),
            ("sessions", str(int(single.get("mpiws_sessions", 0)))),
            (
                "disk",
                f"{_size(single.get('mpiws_disk_used_bytes', 0))} of {_size(single.get('mpiws_disk_limit_bytes', 0))}",
            ),
        ]
        refused = {}
        for n, labels, v in s:
            if n == "mpiws_limit_refusals_total" and v:
                refused[labels["limit"]] = refused.get(labels["limit"], 0) + v
        if refused:
            rows.append(("refused", ", ".join(f"{int(v)} by {k}" for k, v in sorted(refused.items()))))
    for d in described.get("domains", []):  # to an admin key only
        states = {}
        for r in d["ranks"]:
            states.setdefault(r["state"], []).append(r["rank"])
        rows.append(("domain", f"{d['domain']}: " + "; ".join(f"ranks {_ranks(rs)} {st}" for st, rs in states.items())))
    rows.append(("dashboard", url.rstrip("/") + "/dashboard/"))
    lines += [f"  {name:<10} {value}" for name, value in rows]
    return lines


def _ranks(ranks):
    ranks = sorted(ranks)
    return (
        str(ranks[0])
        if len(ranks) == 1
        else f"{ranks[0]}-{ranks[-1]}"
        if ranks == list(range(ranks[0], ranks[-1] + 1))
        else ",".join(map(str, ranks))
    )


def _since(t):
    s = max(0, int(time.time() - t))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _text(client, url):
    """The text at ``url`` (with the key), or None if it is refused (a key without `metrics`)."""
    import tempfile

    with tempfile.NamedTemporaryFile() as f:
        try:
            client.download(url, f.name, keyed=True)
        except Exception:  # noqa: BLE001 - the lines it would give are left out
            return None
        return Path(f.name).read_text()


def status(urls, key=None, as_json=False):
    """What ``mpiws status [URL...]`` prints (this user's local endpoints if no URL), and its exit status."""
    from .jobs import _client

    client = _client(key)
    notes = {n["url"]: n for n in local_endpoints()}
    urls = list(urls) or list(notes)
    if not urls:
        return ["mpiws status: no endpoint of this user runs here (give URLs: mpiws status http://HOST:PORT)"], 1
    out, everything, failed = [], [], 0
    for url in urls:
        try:
            described = json.loads(client.call("GET", url.rstrip("/") + "/", None))
        except Exception as e:  # noqa: BLE001 - one endpoint that does not answer is said, the others go on
            out.append(f"{url}: not answering: {e}")
            failed += 1
            continue
        metrics = _text(client, url.rstrip("/") + "/metrics")
        everything.append({"url": url, "described": described, "metrics": metrics_of(metrics) if metrics else None})
        out += report(url, described, metrics, notes.get(url))
    if as_json:
        return [json.dumps(everything, indent=2)], 1 if failed else 0
    return out, 1 if failed else 0
