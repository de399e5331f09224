"""Ranks started by any means find each other through a rendezvous URL
(``mpiws run --rendezvous URL --size N``, rank from ``--rank`` or the
environment): by hand on loopback, in any order; and as the Kubernetes
Indexed Job in ``deploy/kubernetes/job.yaml`` runs them — its container's own
arguments and environment, in four network namespaces standing in for pods,
each resolving the headless Service's name of rank 0 through its own
``/etc/hosts`` (``ip netns exec`` mounts ``/etc/netns/NAME/hosts``)."""

import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import ROOT
from netns import mpiws_cmd, network

PROGRAM = str(ROOT / "tests" / "rank_programs.py")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(rank, url, size, *args, key, env=None):
    e = {k: v for k, v in os.environ.items() if k not in ("MPIWS_RANK", "MPIWS_SIZE")}
    e.update(MPIWS_KEY=key, PYTHONPATH=str(ROOT), **(env or {}))
    cmd = [*mpiws_cmd(), "run", "--rendezvous", url, "--size", str(size)]
    if rank is not None:
        cmd += ["--rank", str(rank)]
    return subprocess.Popen(
        [*cmd, PROGRAM, *args], env=e, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def finish(procs, timeout=90):
    out = []
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            o, e = p.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            p.kill()
            o, e = p.communicate()
            e += "\n(killed: did not end in time)"
        out.append((p.returncode, o, e))
    return out


def test_ranks_started_by_hand_in_any_order(tmp_path):
    url, key = f"http://127.0.0.1:{free_port()}", secrets.token_hex(16)
    # ranks 3, 2, 1 first (1 by its environment), rank 0, which serves the rendezvous, last
    procs = [
        start(3, url, 4, "check", key=key),
        start(2, url, 4, "check", key=key),
        start(None, url, 4, "check", key=key, env={"MPIWS_RANK": "1"}),
    ]
    time.sleep(1.0)
    procs.insert(0, start(0, url, 4, "check", key=key))
    results = finish(procs)
    info = "\n".join(f"exit {c}\n{o}{e}" for c, o, e in results)
    assert [c for c, _, _ in results] == [0, 0, 0, 0], info
    for r, (_, o, _) in zip([0, 3, 2, 1], results):
        assert f"rank {r} of 4" in o, info
    assert "checked 4 ranks" in results[0][1], info


def test_a_failing_rank_stops_the_domain(tmp_path):
    url, key = f"http://127.0.0.1:{free_port()}", secrets.token_hex(16)
    procs = [start(r, url, 3, "fail", "2", key=key) for r in range(3)]
    results = finish(procs)
    info = "\n".join(f"rank {r}: exit {c}\n{o}{e}" for r, (c, o, e) in enumerate(results))
    assert all(c != 0 for c, _, _ in results), info
    assert "rank 2 failed first: RuntimeError: rank 2 fails on purpose" in results[0][2], info


def test_a_wrong_key_or_a_taken_rank_is_refused_at_once(tmp_path):
    url, key = f"http://127.0.0.1:{free_port()}", secrets.token_hex(16)
    root = start(0, url, 3, "check", key=key)
    try:
        first = start(1, url, 3, "check", key=key)
        t = time.monotonic()
        (wrong,) = finish([start(2, url, 3, "check", key=secrets.token_hex(16))], timeout=60)
        assert wrong[0] != 0 and "not a key of this endpoint" in wrong[2], wrong
        (taken,) = finish([start(1, url, 3, "check", key=key)], timeout=60)
        assert taken[0] != 0 and "rank 1 is already registered" in taken[2], taken
        assert time.monotonic() - t < 30, "refusals are final, not retried"
    finally:
        for p in (root, first):
            p.kill()
            p.communicate()


# --- the Kubernetes Indexed Job, run outside a cluster ---


@pytest.fixture(scope="module")
def pods(request, tmp_path_factory):
    net = network(request, tmp_path_factory, "k8", 4, "10.215.0")
    manifests = ROOT / "deploy" / "kubernetes"
    job = yaml.safe_load((manifests / "job.yaml").read_text())
    service = yaml.safe_load((manifests / "service.yaml").read_text())
    # the headless Service's DNS: each pod resolves <job>-<index>.<service> to that pod's address
    names = [f"{job['metadata']['name']}-{i}.{service['metadata']['name']}" for i in range(len(net.hosts))]
    for ns in net.hosts:
        d = Path("/etc/netns") / ns
        d.mkdir(parents=True, exist_ok=True)
        request.addfinalizer(lambda d=d: shutil.rmtree(d, ignore_errors=True))
        (d / "hosts").write_text("127.0.0.1 localhost\n" + "".join(f"{a} {n}\n" for a, n in zip(net.addrs, names)))
    return net, job


def test_the_kubernetes_job_runs_as_its_manifest_says(pods):
    net, job = pods
    spec = job["spec"]
    assert spec["completions"] == len(net.hosts)
    container = spec["template"]["spec"]["containers"][0]
    key = secrets.token_urlsafe(32)  # what the user puts in the Secret
    procs = []
    for index, (ns, addr) in enumerate(zip(net.hosts, net.addrs)):
        env = {"JOB_COMPLETION_INDEX": str(index)}  # set by Kubernetes in Indexed Jobs
        for e in container["env"]:
            if e["name"] == "MPIWS_KEY":
                env[e["name"]] = key
            elif e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP":
                env[e["name"]] = addr
            elif e["name"] not in ("HOME", "TMPDIR"):
                env[e["name"]] = e["value"]
        # $(VAR) in args is Kubernetes' expansion; the program's path in the image is the repo's here
        args = [a.replace("$(POD_IP)", addr).replace("/app/", f"{ROOT}/") for a in container["args"]]
        procs.append(net.start(ns, [*mpiws_cmd(), *args], f"pod-{index}", env=dict(os.environ, **env)))
        if index == 0:
            time.sleep(0.5)  # rank 0 need not be first; give the others a head start of nothing in particular
    codes = []
    for p in procs:
        try:
            codes.append(p.wait(timeout=120))
        except subprocess.TimeoutExpired:
            p.kill()
            codes.append(None)
    logs = net.logs()
    assert codes == [0] * len(procs), logs
    assert "token came back after visiting 4 ranks: [0, 1, 2, 3]" in (net.tmp / "pod-0.out").read_text(), logs
