"""What a SOAP 1.2 `store` costs against the native store (`POST
/domains/{d}/ranks/{r}/messages`): one client sends messages one after the
other over one kept-alive connection to a rank that receives them, each
way in alternating rounds (medians of the per-message time; the ratio is
what to compare). Ways: native (the envelope in headers, the payload as
the body), SOAP inline (the payload base64 in the XML), SOAP MTOM (the
payload a binary part).

Entry point: benchmarks/soap/run [--quick] [--rounds R]
"""

import argparse
import base64
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlparse

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SOAP12 = "http://www.w3.org/2003/05/soap-envelope"
SIZES = [(8, 2000), (1 << 20, 100)]
QUICK = [(8, 500), (1 << 20, 30)]
WAYS = ("native", "soap", "mtom")


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def serve(key_file):
    env = dict(os.environ, MPIWS_KEY_FILE=str(key_file), PYTHONPATH=str(HERE))
    p = subprocess.Popen(
        [str(ROOT / ".venv/bin/mpiws"), "serve", "--service", "sink=services:sink", "--max-message", str(64 << 20)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=HERE,
        env=env,
        text=True,
    )
    for line in p.stdout:
        if "http://" in line:
            return p, line[line.index("http://") :].split()[0]
    raise RuntimeError("mpiws serve did not say its URL")


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
