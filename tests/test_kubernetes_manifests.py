"""The Kubernetes manifests in deploy/kubernetes: valid against the Kubernetes
API schemas, and the launch contract of `mpiws run --rendezvous` holds.

Validation is kubeconform's (-strict: no unknown fields, no duplicate keys)
against the JSON schemas of a pinned Kubernetes release. kubeconform normally
downloads those schemas from GitHub at run time; here they are made from the
release's own OpenAPI spec, api/openapi-spec/swagger.json of the Go module
k8s.io/kubernetes, fetched with `go mod download` (the Go module proxy, checked
against the Go checksum database), and written in kubeconform's layout
(<dir>/v<version>-standalone-strict/<kind>-<group>-<version>.json). The tool
(`go install`) and the schemas are cached under target/tools.

A deliberately broken copy of each manifest must be rejected, so that a
validation that checks nothing cannot pass. Skipped, saying why, when Go is
missing or the module proxy cannot be reached.
"""

import copy
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "kubernetes"
TOOLS = ROOT / "target" / "tools"
BIN = TOOLS / "bin"

KUBECONFORM_MODULE = "github.com/yannh/kubeconform"
KUBECONFORM_VERSION = "v0.8.0"
KUBERNETES_VERSION = "1.30.14"  # the schemas' release: k8s.io/kubernetes@v1.30.14
SCHEMAS = TOOLS / "kubernetes-json-schema"
# Bump when the conversion below changes, so that cached schemas are remade.
SCHEMA_FORMAT = "1"
SCHEMA_LOCATION = (
    str(SCHEMAS)
    + "/{{ .NormalizedKubernetesVersion }}-standalone{{ .StrictSuffix }}/{{ .ResourceKind }}{{ .KindSuffix }}.json"
)

# What a failed `go` download prints when the network, not the request, is at fault.
UNREACHABLE = re.compile(
    r"dial tcp|no such host|i/o timeout|connection refused|connection reset|network is unreachable|"
    r"TLS handshake|proxyconnect|GOPROXY=off|lookup disabled|Service Unavailable|Bad Gateway|Gateway Timeout|"
    r"temporary failure in name resolution",
    re.I,
)

TIMINGS = {}


# --------------------------------------------------------------------------
# tools: kubeconform and the schemas
# --------------------------------------------------------------------------


def _go_env(**extra):
    # GOFLAGS as go sees it (environment or `go env -w`), plus a module cache
    # that can be removed without chmod.
    goflags = subprocess.run(["go", "env", "GOFLAGS"], capture_output=True, text=True).stdout.strip()
    env = dict(os.environ)
    env.update(GOBIN=str(BIN), GOWORK="off", GO111MODULE="on", GOFLAGS=f"{goflags} -modcacherw".strip())
    env.update(extra)
    return env


def _go(args, env, what):
    """Run go; skip if the proxy cannot be reached, fail on any other error."""
    p = subprocess.run(["go", *args], cwd=TOOLS, env=env, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        err = (p.stderr + p.stdout).strip()
        if UNREACHABLE.search(err):
            pytest.skip(f"{what}: the Go module proxy cannot be reached: {err[-600:]}")
        if re.search(r"requires go >= \S+ \(running go \S+; GOTOOLCHAIN=local\)", err):
            pytest.skip(f"{what}: this Go is too old and may not fetch a newer one: {err[-600:]}")
        pytest.fail(f"{what} failed (go {' '.join(args)}):\n{err[-3000:]}")
    return p.stdout


@contextmanager
def _locked():
    """One pytest process at a time installs and generates."""
    TOOLS.mkdir(parents=True, exist_ok=True)
    with open(TOOLS / ".kubernetes-tools.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _installed_version(binary):
    """The kubeconform module version a binary was built from (go version -m)."""
    if not binary.exists():
        return None
    p = subprocess.run(["go", "version", "-m", str(binary)], capture_output=True, text=True)
    m = re.search(r"^\s*mod\s+" + re.escape(KUBECONFORM_MODULE) + r"\s+(\S+)", p.stdout, re.M)
    return m and m.group(1)


def _install_kubeconform():
    binary = BIN / "kubeconform"
    if _installed_version(binary) != KUBECONFORM_VERSION:
        t = time.monotonic()
        _go(
            ["install", f"{KUBECONFORM_MODULE}/cmd/kubeconform@{KUBECONFORM_VERSION}"],
            _go_env(),
            f"installing kubeconform {KUBECONFORM_VERSION}",
        )
        TIMINGS["install kubeconform"] = time.monotonic() - t
        assert _installed_version(binary) == KUBECONFORM_VERSION, f"{binary} is not kubeconform {KUBECONFORM_VERSION}"
    return binary


def _rmtree(path):
    def writable(func, p, _exc):
        os.chmod(p, 0o700)
        func(p)

    if path.exists():
        shutil.rmtree(path, onerror=writable)


def _openapi_spec():
    """swagger.json of k8s.io/kubernetes@v<KUBERNETES_VERSION>, from the Go
    module proxy into a private module cache, removed afterwards."""
    modcache = TOOLS / "k8s-modcache.tmp"
    _rmtree(modcache)
    try:
        out = _go(
            ["mod", "download", "-json", f"k8s.io/kubernetes@v{KUBERNETES_VERSION}"],
            _go_env(GOMODCACHE=str(modcache)),
            f"downloading k8s.io/kubernetes v{KUBERNETES_VERSION}",
        )
        info = json.loads(out)
        assert "Error" not in info, info
        spec = Path(info["Dir"]) / "api" / "openapi-spec" / "swagger.json"
        assert spec.is_file(), f"no {spec} in k8s.io/kubernetes v{KUBERNETES_VERSION}"
        assert spec.stat().st_size < 50 << 20, f"{spec} is {spec.stat().st_size} bytes"
        return json.loads(spec.read_text())
    finally:
        _rmtree(modcache)


REF = "#/definitions/"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"


def _strict(node):
    """A definition as a draft-4 schema in kubeconform's 'strict' flavour:
    objects that list their properties refuse any other (what the API server's
    strict field validation does), optional fields may be null (the API server
    takes null as unset), descriptions and x-kubernetes-* extensions dropped."""
    if isinstance(node, list):
        return [_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items() if k != "description" and not k.startswith("x-kubernetes-")}
    if "properties" in node:
        required = set(node.get("required", ()))
        out["properties"] = {
            name: (s if name in required else _nullable(s))
            for name, s in ((n, _strict(p)) for n, p in node["properties"].items())
        }
        out.setdefault("additionalProperties", False)
    return out


def _nullable(s):
    if "$ref" in s:
        return {"anyOf": [s, {"type": "null"}]}
    if isinstance(s.get("type"), str):
        return dict(s, type=[s["type"], "null"])
    return s


def _refs(node, found):
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF):
            found.add(ref[len(REF) :])
        for v in node.values():
            _refs(v, found)
    elif isinstance(node, list):
        for v in node:
            _refs(v, found)


def convert(swagger):
    """{file name: schema} in kubeconform's standalone-strict layout, one file
    per (kind, group, version) the spec declares. 'Standalone': each file holds
    every definition it refers to (in its own `definitions`, which also keeps
    recursive types finite)."""
    defs = {name: _strict(d) for name, d in swagger["definitions"].items()}
    # Types whose JSON form the API server takes in two shapes (as openapi2jsonschema
    # does for int-or-string; a quantity may be written 1 or "500m").
    defs[INT_OR_STRING] = {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    defs[QUANTITY] = {"oneOf": [{"type": "string"}, {"type": "number"}]}
    files = {}
    for name, original in swagger["definitions"].items():
        for gvk in original.get("x-kubernetes-group-version-kind", ()):
            group, version, kind = gvk["group"], gvk["version"], gvk["kind"]
            api_version = f"{group}/{version}" if group else version
            # kubeconform's KindSuffix: the group's first label, then the version.
            suffix = (f"-{group.split('.')[0]}" if group else "") + f"-{version}"
            filename = f"{kind}{suffix}".lower() + ".json"
            if filename in files:
                continue
            schema = copy.deepcopy(defs[name])
            props = schema.get("properties", {})
            if "apiVersion" in props and "kind" in props:
                props["apiVersion"] = {"type": "string", "enum": [api_version]}
                props["kind"] = {"type": "string", "enum": [kind]}
            reachable, todo = set(), set()
            _refs(schema, todo)
            while todo:
                ref = todo.pop()
                if ref not in reachable:
                    reachable.add(ref)
                    _refs(defs[ref], todo)
            schema["definitions"] = {r: defs[r] for r in sorted(reachable)}
            files[filename] = schema
    return files


def _make_schemas():
    target = SCHEMAS / f"v{KUBERNETES_VERSION}-standalone-strict"
    stamp = SCHEMAS / f".v{KUBERNETES_VERSION}.complete"
    if stamp.is_file() and stamp.read_text() == SCHEMA_FORMAT and target.is_dir():
        return
    t = time.monotonic()
    files = convert(_openapi_spec())
    tmp = SCHEMAS / f".v{KUBERNETES_VERSION}.tmp"
    _rmtree(tmp)
    tmp.mkdir(parents=True)
    for name, schema in files.items():
        (tmp / name).write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True))
    _rmtree(target)
    tmp.rename(target)
    stamp.write_text(SCHEMA_FORMAT)
    TIMINGS["generate schemas"] = time.monotonic() - t


@pytest.fixture(scope="module")
def kubeconform():
    if shutil.which("go") is None:
        pytest.skip("Go is not installed: kubeconform is installed with `go install`")
    with _locked():
        binary = _install_kubeconform()
        _make_schemas()
    if TIMINGS:
        print("\nkubernetes tools: " + ", ".join(f"{k} {v:.1f}s" for k, v in TIMINGS.items()), file=sys.stderr)
    return binary


def validate(binary, paths):
    """kubeconform -strict -summary on paths; returns (exit code, its JSON report)."""
    p = subprocess.run(
        [
            str(binary),
            "-strict",
            "-summary",
            "-verbose",
            "-output",
            "json",
            "-kubernetes-version",
            KUBERNETES_VERSION,
            "-schema-location",
            SCHEMA_LOCATION,
            *map(str, paths),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        report = json.loads(p.stdout)
    except ValueError:
        pytest.fail(f"kubeconform printed no JSON report (exit {p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p.returncode, report


# --------------------------------------------------------------------------
# the manifests
# --------------------------------------------------------------------------

KUSTOMIZATION = DEPLOY / "kustomization.yaml"


def manifest_files():
    """Every Kubernetes manifest in deploy/kubernetes (kustomization.yaml is
    kustomize's own file, not an API object: kubeconform has no schema for it)."""
    return sorted(p for p in DEPLOY.glob("*.y*ml") if p != KUSTOMIZATION)


def load_docs(paths=None):
    docs = []
    for p in paths or manifest_files():
        docs += [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
    return docs


def one(docs, kind):
    found = [d for d in docs if d.get("kind") == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def flags(args):
    """{'--flag': value} of the options before PROGRAM, and PROGRAM [ARGS]."""
    assert args and args[0] == "run", f"container args must be `run ...`: {args}"
    opts, i = {}, 1
    while i < len(args) and args[i].startswith("--"):
        assert i + 1 < len(args), f"{args[i]} has no value"
        opts[args[i]] = args[i + 1]
        i += 2
    return opts, args[i:]


def subset(small, big):
    return bool(small) and all(big.get(k) == v for k, v in small.items())


def check_contract(docs):
    """The launch contract of `mpiws run --rendezvous` as these manifests must
    express it; AssertionError says what is wrong."""
    job, svc, netpol = one(docs, "Job"), one(docs, "Service"), one(docs, "NetworkPolicy")
    assert not [d for d in docs if d.get("kind") == "Secret"], (
        "no Secret in the repo: the user creates mpiws-key (see README.md)"
    )
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    labels = job["spec"]["template"]["metadata"]["labels"]
    job_name, svc_name = job["metadata"]["name"], svc["metadata"]["name"]

    # One pod per rank, all at once, each knowing its index.
    assert spec["completionMode"] == "Indexed", spec.get("completionMode")
    n = spec["completions"]
    assert isinstance(n, int) and n >= 1
    assert spec["parallelism"] == n, "parallelism must equal completions: every rank runs at once"
    assert spec.get("backoffLimit") == 0, "a domain cannot take a replacement rank: backoffLimit 0"
    assert pod["restartPolicy"] == "Never"

    # Rank 0's stable name: <job-name>-<index>.<subdomain>, the subdomain a headless Service.
    assert pod["subdomain"] == svc_name, "the pod template's subdomain must name the headless Service"
    assert svc["spec"]["clusterIP"] == "None", "the Service must be headless"
    assert subset(svc["spec"]["selector"], labels), "the Service must select the Job's pods"
    assert svc["spec"].get("publishNotReadyAddresses") is True, "ranks resolve each other before they are Ready"
    assert len(job_name) + 1 + len(str(n - 1)) <= 63, "pod hostnames <job-name>-<index> must fit a DNS label"

    (container,) = pod["containers"]
    opts, program = flags(container["args"])
    assert "--rank" not in opts, "the rank comes from JOB_COMPLETION_INDEX"
    assert "JOB_COMPLETION_INDEX" not in {e["name"] for e in container.get("env", ())}
    url = urlparse(opts["--rendezvous"])
    assert url.scheme == "http", url
    assert url.hostname == f"{job_name}-0.{svc_name}", (
        f"rendezvous host {url.hostname!r} is not rank 0's name {job_name}-0.{svc_name}"
    )
    assert opts["--size"] == str(n), f"--size {opts['--size']} but completions {n}"
    assert opts["--host"] == "0.0.0.0"

    port = int(opts["--port"])
    (svc_port,) = svc["spec"]["ports"]
    (container_port,) = container["ports"]
    assert url.port == port == svc_port["port"] == container_port["containerPort"], (
        f"ports: rendezvous {url.port}, --port {port}, Service {svc_port['port']}, container {container_port['containerPort']}"
    )
    assert svc_port.get("targetPort") in (port, container_port.get("name")), (
        "the Service must target the container port"
    )

    env = {e["name"]: e for e in container["env"]}
    assert opts["--advertise"] == "$(POD_IP)"
    assert env["POD_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    key = env["MPIWS_KEY"]
    assert "value" not in key, "never a key in the manifests"
    assert key["valueFrom"]["secretKeyRef"] == {"name": "mpiws-key", "key": "key"}

    # PROGRAM: an example of the repo, which the image copies to /app/examples.
    assert program, "no PROGRAM after the options"
    assert program[0].startswith("/app/examples/"), program
    assert (ROOT / "examples" / program[0][len("/app/examples/") :]).is_file(), f"{program[0]} is not in examples/"

    # Hardening.
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert {"requests", "limits"} <= set(container["resources"])

    # Only the Job's own pods reach port 7070.
    ns = netpol["spec"]
    assert subset(ns["podSelector"]["matchLabels"], labels)
    assert "Ingress" in ns["policyTypes"]
    (rule,) = ns["ingress"]
    assert all(
        subset(peer["podSelector"]["matchLabels"], labels) and set(peer) == {"podSelector"} for peer in rule["from"]
    ), "ingress only from the Job's pods"
    assert [p["port"] for p in rule["ports"]] == [port]


# --------------------------------------------------------------------------
# tests
# --------------------------------------------------------------------------


def test_manifests_are_valid_kubernetes_objects(kubeconform):
    paths = manifest_files()
    expected = len(load_docs(paths))
    assert expected >= 3, f"manifests: {[p.name for p in paths]}"
    code, report = validate(kubeconform, paths)
    assert code == 0, json.dumps(report, indent=2)
    assert report["summary"] == {"valid": expected, "invalid": 0, "errors": 0, "skipped": 0}, report
    assert {r["kind"] for r in report["resources"]} >= {"Job", "Service", "NetworkPolicy"}


def test_schemas_are_strict(kubeconform):
    """The Job schema kubeconform uses refuses unknown fields at every level."""
    path = SCHEMAS / f"v{KUBERNETES_VERSION}-standalone-strict" / "job-batch-v1.json"
    schema = json.loads(path.read_text())
    assert schema["additionalProperties"] is False
    assert schema["properties"]["apiVersion"]["enum"] == ["batch/v1"]
    assert schema["definitions"]["io.k8s.api.core.v1.Container"]["additionalProperties"] is False


def _set(doc, path, value):
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value


BROKEN = {
    # an unknown field, refused only under -strict
    "job: misspelled field spec.completionMod": ("Job", ("spec", "completionMod"), "Indexed"),
    "job: unknown container field": ("Job", ("spec", "template", "spec", "containers", 0, "securityContexts"), {}),
    "job: completions is not an integer": ("Job", ("spec", "completions"), "four"),
    "job: args is not a list": ("Job", ("spec", "template", "spec", "containers", 0, "args"), "run"),
    "service: port is not a number": ("Service", ("spec", "ports", 0, "port"), "seventy"),
    "service: unknown spec field": ("Service", ("spec", "headless"), True),
    "networkpolicy: unknown rule field": ("NetworkPolicy", ("spec", "ingress", 0, "fromPods"), []),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_broken_manifest_is_rejected(kubeconform, tmp_path, case):
    kind, path, value = BROKEN[case]
    doc = copy.deepcopy(one(load_docs(), kind))
    _set(doc, path, value)
    broken = tmp_path / "broken.yaml"
    broken.write_text(yaml.safe_dump(doc))
    code, report = validate(kubeconform, [broken])
    assert code != 0, f"{case}: accepted\n{json.dumps(report, indent=2)}"
    assert report["summary"]["invalid"] == 1, report


def test_duplicate_key_is_rejected(kubeconform, tmp_path):
    """-strict also refuses a key given twice (YAML would keep the last)."""
    text = (DEPLOY / "job.yaml").read_text()
    assert "\n  completions: " in text
    broken = tmp_path / "job.yaml"
    broken.write_text(text.replace("\n  completions: ", "\n  completions: 2\n  completions: ", 1))
    code, report = validate(kubeconform, [broken])
    assert code != 0, f"duplicate key accepted\n{json.dumps(report, indent=2)}"


def test_launch_contract():
    check_contract(load_docs())


def _mutate(kind, fn):
    docs = copy.deepcopy(load_docs())
    fn(one(docs, kind))
    return docs


def _args(job):
    return job["spec"]["template"]["spec"]["containers"][0]["args"]


def _replace_arg(flag, value):
    def fn(job):
        a = _args(job)
        a[a.index(flag) + 1] = value

    return fn


CONTRACT_BREAKS = {
    # kubeconform cannot see this one: the schemas carry no enums.
    "completionMode typo": ("Job", lambda j: _set(j, ("spec", "completionMode"), "Indexd")),
    "--size differs from completions": ("Job", _replace_arg("--size", "3")),
    "parallelism differs": ("Job", lambda j: _set(j, ("spec", "parallelism"), 2)),
    "rendezvous on rank 1": ("Job", _replace_arg("--rendezvous", "http://mpiws-1.mpiws-ranks:7070")),
    "rendezvous port differs": ("Job", _replace_arg("--rendezvous", "http://mpiws-0.mpiws-ranks:8080")),
    "subdomain differs from Service": ("Job", lambda j: _set(j, ("spec", "template", "spec", "subdomain"), "other")),
    "Service not headless": ("Service", lambda s: s["spec"].pop("clusterIP")),
    "Service port differs": ("Service", lambda s: _set(s, ("spec", "ports", 0, "port"), 7071)),
    "key as a literal": (
        "Job",
        lambda j: _set(
            j, ("spec", "template", "spec", "containers", 0, "env", 0), {"name": "MPIWS_KEY", "value": "not-a-secret"}
        ),
    ),
    "program not in examples": ("Job", lambda j: _args(j).__setitem__(-1, "/app/examples/nope.py")),
}


@pytest.mark.parametrize("case", sorted(CONTRACT_BREAKS))
def test_contract_check_catches(case):
    kind, fn = CONTRACT_BREAKS[case]
    with pytest.raises((AssertionError, KeyError)):
        check_contract(_mutate(kind, fn))


def test_kustomization_lists_every_manifest():
    k = yaml.safe_load(KUSTOMIZATION.read_text())
    assert k["kind"] == "Kustomization"
    assert sorted(k["resources"]) == sorted(p.name for p in manifest_files())


def test_image_and_readme():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    assert "COPY examples/ /app/examples/" in dockerfile
    assert re.search(r"^FROM python:\$\{PYTHON_VERSION\}-slim|^FROM python:3\.11-slim", dockerfile, re.M)
    assert re.search(r"^ARG PYTHON_VERSION=3\.11$", dockerfile, re.M)
    readme = (DEPLOY / "README.md").read_text()
    assert "kubectl create secret generic mpiws-key --from-literal=key=" in readme
    for p in DEPLOY.iterdir():
        # a committed key would look like one: long base64/hex after key=
        assert not re.search(r"key=(?!\$\()[A-Za-z0-9_\-]{20,}", p.read_text()), f"{p.name} seems to hold a key"
