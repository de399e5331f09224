"""What a SOAP 1.2 `store` costs against the native store (`POST
/domains/{d}/ranks/{r}/messages`): one client sends messages one after the
other over one kept-alive connection to a rank that receives them, each
way in alternating rounds (medians of the per-message time; the ratio is
what to compare). Ways: native (the envelope in headers, the payload as
the body), SOAP inline (the payload base64 in the XML), SOAP MTOM (the
payload a binary part).

Also: a program's `call` with a 64 MiB file in and out (a `cp` job): the
file in as base64 in the XML and out by the URL the answer gives (over 16
MiB, an inline answer gives a URL), against in and out as MTOM parts; the
endpoint's (its own process's) peak memory grown by each (VmHWM), and the
time.

Entry point: benchmarks/soap/run [--quick] [--rounds R]
"""

import argparse
import base64
import http.client
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import common  # noqa: E402

SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SIZES = [(8, 2000), (1 << 20, 100)]
QUICK = [(8, 500), (1 << 20, 30)]
WAYS = ("native", "soap", "mtom")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def serve(key_file, *more):
    env = dict(os.environ, MPIWS_KEY_FILE=str(key_file), PYTHONPATH=str(HERE))
    return common.serve(["--service", "sink=services:sink", "--max-message", str(64 << 20), *more], env=env, cwd=HERE)


def request(conn, method, path, body, headers):
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {data[:300]!r}")
    return data


def soap_store(source, seq, payload, mtom):
    if not mtom:
        b64 = base64.b64encode(payload).decode()
        xml = f'<s:Envelope xmlns:s="{SOAP12}"><s:Body><store xmlns="urn:mpiws:services"><source>{source}</source><seq>{seq}</seq><payload>{b64}</payload></store></s:Body></s:Envelope>'
        return xml.encode(), "application/soap+xml; charset=utf-8"
    inc = '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:p"/>'
    xml = f'<s:Envelope xmlns:s="{SOAP12}"><s:Body><store xmlns="urn:mpiws:services"><source>{source}</source><seq>{seq}</seq><payload>{inc}</payload></store></s:Body></s:Envelope>'
    b = "mpiwsbench"
    body = (
        (
            f'--{b}\r\nContent-Type: application/xop+xml; type="application/soap+xml"\r\nContent-ID: <root>\r\n\r\n{xml}\r\n'
            f"--{b}\r\nContent-Type: application/octet-stream\r\nContent-Transfer-Encoding: binary\r\nContent-ID: <p>\r\n\r\n"
        ).encode()
        + payload
        + f"\r\n--{b}--\r\n".encode()
    )
    return body, f'multipart/related; type="application/xop+xml"; start="<root>"; boundary="{b}"'


def one_round(url, key, way, size, count):
    """Per-message seconds of `count` stores of `size` bytes, the way `way`, to a fresh rank."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=120)
    domain, token = f"b{secrets.token_hex(6)}", secrets.token_hex(16)
    binding = {
        "domain": domain,
        "rank": 0,
        "endpoints": [url, url],
        "token": token,
        "service": "sink",
        "params": {"count": count, "size": size},
    }
    request(
        conn,
        "POST",
        "/run",
        json.dumps(binding),
        {"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    payload = os.urandom(size)
    auth = {"authorization": f"Bearer {token}"}
    t = time.perf_counter()
    for seq in range(count):
        if way == "native":
            request(
                conn,
                "POST",
                f"/domains/{domain}/ranks/0/messages",
                payload,
                {**auth, "mpiws-source": "1", "mpiws-seq": str(seq)},
            )
        else:
            body, ctype = soap_store(1, seq, payload, way == "mtom")
            request(conn, "POST", f"/domains/{domain}/ranks/0", body, {**auth, "content-type": ctype})
    per = (time.perf_counter() - t) / count
    status = json.loads(request(conn, "GET", f"/domains/{domain}/ranks/0?wait=60", None, auth))
    if status["state"] != "done":
        raise RuntimeError(f"the rank did not receive them all: {status}")
    conn.close()
    return per


def peak_kib(pid):
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))


def file_both_ways(key_file, key, size, mtom):
    """A `call` of `cp` with a `size`-byte file, in and out by `mtom` or base64 in the XML: (seconds,
    MiB the endpoint's peak memory grew by), on an endpoint of its own."""
    p, url = serve(
        key_file,
        "--program",
        "copy=cp [in:file:src:binary] [out:file:dst:binary]",
        "--max-spawn-body",
        str(1 << 30),
        "--max-buffered",
        str(4 << 30),
    )
    try:
        u = urlparse(url)
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        before = peak_kib(p.pid)
        blob = os.urandom(size)
        headers = {"authorization": f"Bearer {key}"}
        if mtom:
            inc = '<xop:Include xmlns:xop="http://www.w3.org/2004/08/xop/include" href="cid:f"/>'
            xml = f'<s:Envelope xmlns:s="{SOAP12}"><s:Body><call xmlns="urn:mpiws:program:copy"><src><value>{inc}</value></src></call></s:Body></s:Envelope>'
            b = "mpiwsbench"
            head = f'--{b}\r\nContent-Type: application/xop+xml; type="application/soap+xml"\r\nContent-ID: <root>\r\n\r\n{xml}\r\n--{b}\r\nContent-ID: <f>\r\n\r\n'
            body = head.encode() + blob + f"\r\n--{b}--\r\n".encode()
            headers["content-type"] = f'multipart/related; type="application/xop+xml"; start="<root>"; boundary="{b}"'
        else:
            value = base64.b64encode(blob).decode()
            xml = f'<s:Envelope xmlns:s="{SOAP12}"><s:Body><call xmlns="urn:mpiws:program:copy"><src><value>{value}</value></src></call></s:Body></s:Envelope>'
            body = xml.encode()
            headers["content-type"] = "application/soap+xml; charset=utf-8"
        del blob
        t = time.perf_counter()
        answer = request(conn, "POST", "/programs/copy", body, headers)
        took = time.perf_counter() - t
        if not mtom and len(answer) < size:  # over 16 MiB, inline answers give the file's URL: fetched
            link = answer.decode().split("<p:dst><p:url>")[1].split("</p:url>")[0]
            answer = request(conn, "GET", urlparse(link).path, None, {})
        if len(answer) < size:
            raise RuntimeError(f"the answer holds {len(answer)} bytes, not the file")
        return took, (peak_kib(p.pid) - before) / 1024
    finally:
        p.terminate()
        p.wait()


def main():
    a = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    a.add_argument("--quick", action="store_true")
    a.add_argument("--rounds", type=int, default=5)
    args = a.parse_args()
    sizes = QUICK if args.quick else SIZES
    with tempfile.TemporaryDirectory() as d:
        key = secrets.token_hex(24)
        kf = Path(d) / "keys"
        kf.write_text(f"{key} run\n")
        kf.chmod(0o600)
        p, url = serve(kf)
        try:
            times = {(w, s): [] for w in WAYS for s, _ in sizes}
            for r in range(args.rounds):
                for size, count in sizes:
                    for way in WAYS if r % 2 == 0 else reversed(WAYS):
                        times[(way, size)].append(one_round(url, key, way, size, count))
                log(f"round {r + 1}/{args.rounds} done")
        finally:
            p.terminate()
            p.wait()
        size = (8 if args.quick else 64) << 20
        kf.write_text(f"{key} run jobs\n")
        files = {
            way: [file_both_ways(kf, key, size, way == "mtom") for _ in range(1 if args.quick else 3)]
            for way in ("inline", "mtom")
        }
    print(
        f"A program's call with a {size >> 20} MiB file in and out, on an endpoint of its own; medians of {len(files['mtom'])}"
    )
    print("| way | time (s) | endpoint peak memory grown (MiB) |")
    print("|---|---:|---:|")
    for way, label in (("inline", "base64 in the XML in, its URL out"), ("mtom", "MTOM parts, both ways (streamed)")):
        print(
            f"| {label} | {statistics.median(t for t, _ in files[way]):.2f} | {statistics.median(m for _, m in files[way]):.0f} |"
        )
    print()
    print(
        f"SOAP store against the native store, one client, one connection; medians of {args.rounds} alternating rounds"
    )
    print("| size | native (us) | SOAP inline (us) | SOAP MTOM (us) | inline / native | MTOM / native |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, _ in sizes:
        n, s, m = (statistics.median(times[(w, size)]) * 1e6 for w in WAYS)
        label = f"{size} B" if size < 1024 else f"{size >> 20} MiB"
        print(f"| {label} | {n:.0f} | {s:.0f} | {m:.0f} | {s / n:.2f} | {m / n:.2f} |")


if __name__ == "__main__":
    main()
