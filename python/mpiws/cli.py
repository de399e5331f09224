"""The ``mpiws`` command line: ``serve`` an endpoint, ``run`` a domain, ``bench`` against MPI,
use deployed programs: ``usage``, ``call``, ``spawn``, ``job``, ``session``, and run workflows: ``workflow``."""

import argparse
import json
import os
import sys
import threading


#: `mpiws serve` flags that are endpoint limits: each sets the core's endpoint setting of the same
#: name (``--max-message`` is ``max_message``; `_core.endpoint_settings`, where its default is
#: declared), passed on as given (unset: the default). (flag, unit, what it bounds).
LIMITS = [
    ("--max-message", "bytes", "largest message body"),
    ("--max-upload", "bytes", "largest uploaded file"),
    ("--max-connections", "", "connections served at once"),
    ("--max-connections-per-address", "", "connections served at once from one client address"),
    ("--max-buffered", "bytes", "request bodies read whole (bindings, spawn inputs) held at once, all connections"),
    ("--reserved-connections", "", "of --max-connections, places kept for clients that showed a credential"),
    ("--header-timeout", "seconds", "to send a request head, idle connections too"),
    ("--body-timeout", "seconds", "a request body may stall"),
    ("--max-binding", "bytes", "largest run request body"),
    ("--max-ranks", "", "most ranks in a domain"),
    ("--max-instances", "", "instances running at once on this endpoint"),
    ("--max-instances-per-key", "", "instances running at once per key"),
    ("--max-fetch", "bytes", "largest URL input a job may pull"),
    ("--fetch-timeout", "seconds", "a URL input may take to pull"),
    ("--max-disk", "bytes", "disk quota of the work directory"),
    ("--max-disk-per-key", "bytes", "the most of the disk quota one key's uploads and jobs take"),
    ("--max-jobs", "", "most jobs kept at once, running or ended"),
    ("--max-jobs-per-key", "", "most jobs one key holds at once, running or ended"),
    ("--max-uploads-per-key", "", "uploads one key keeps at once"),
    ("--job-ttl", "seconds", "an ended job or an upload is kept"),
    ("--max-session-disk", "bytes", "the largest disk quota a session may have (also its default)"),
    ("--session-idle", "seconds", "the longest a session may stay unused before it is removed (also its default)"),
    ("--max-sessions-per-key", "", "sessions one key keeps at once"),
    ("--max-spawn-body", "bytes", "largest spawn request body"),
    ("--tls-handshake-timeout", "seconds", "a connection has to complete its TLS handshake"),
    ("--max-instance-memory", "bytes", "address space of one instance's process; 0: unbounded"),
    ("--max-instances-memory", "machine bytes", "resident memory of all instance processes together; 0: unbounded"),
    (
        "--max-instances-memory-per-key",
        "machine bytes",
        "resident memory of one key's instance processes; 0: unbounded",
    ),
    ("--max-instance-time", "seconds", "an instance may run before it is ended"),
    ("--spare-instances", "", "instance processes kept started ahead of need, so instances start at once"),
    ("--instance-linger", "seconds", "an ended instance is kept whole (then only its status is)"),
    ("--relay-max-connections", "", "with --relay: connections one name keeps open to this relay"),
    ("--max-dashboard-streams", "", "dashboard pages open at once (each gathers the endpoint's state every second)"),
]


def human(value, unit):
    """A setting's default as people read it: 1 GiB, 64 MiB, 30 s, 24 h, 1024."""
    if value is None:
        return "--max-upload"  # max_fetch: the upload limit unless set
    if unit == "machine bytes":  # a default made from this machine's memory
        machine = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        share = {machine // 2: "half", machine // 4: "a quarter"}.get(value)
        return f"{share} of the machine's memory" if share else human(value, "bytes")
    if unit == "bytes":
        for shift, name in ((30, "GiB"), (20, "MiB"), (10, "KiB")):
            if value >= 1 << shift and value % (1 << shift) == 0:
                return f"{value >> shift} {name}"
        return f"{value} bytes"
    if unit == "seconds":
        return f"{value / 3600:g} h" if value >= 3600 and value % 3600 == 0 else f"{value:g} s"
    return str(value)


def _limit_options(group):
    """The LIMITS flags, each with its help and the core's default."""
    from . import _core

    defaults = json.loads(_core.endpoint_settings())
    for flag, unit, text in LIMITS:
        default = human(defaults[flag[2:].replace("-", "_")], unit)
        kind = float if unit == "seconds" else int
        metavar = unit.split()[-1].upper() if unit else "N"
        group.add_argument(flag, type=kind, metavar=metavar, help=f"{text} (default: {default})")


def _relay_key(via_relay):
    """The key ``--via-relay`` registers with (``keys.relay_key``), or None without it."""
    if not via_relay:
        return None
    from .keys import relay_key

    found = relay_key()
    if not found:
        raise SystemExit(
            "mpiws: --via-relay needs a key of the relay (with the 'relay' scope) in MPIWS_RELAY_KEY or MPIWS_KEY"
        )
    return found


def _tunnel_key(a):
    """Where an endpoint behind a relay keeps its tunnel key (``--tunnel-key``,
    else ``keys.tunnel_key_file``), so that its pinned URL outlives a restart;
    None when not behind a relay, or when its --tls-cert is its identity."""
    if not a.via_relay or a.tls_cert:
        return None
    from .keys import tunnel_key_file

    return str(tunnel_key_file(a.via_relay, a.tunnel_key))


def _loopback(host):
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _serve(a):
    from . import _core
    from .service import cwl_runner
    from .service.serve import Server, load

    # Before any thread starts: SIGTERM and SIGINT end the process even while
    # a service holds the GIL (a Python handler would wait for it for ever).
    _core.exit_on_signals()
    if not _loopback(a.host) and not (a.tls_cert or a.tls_self_signed) and not a.insecure:
        raise SystemExit(
            f"mpiws serve: refusing to listen on {a.host} without TLS: keys and messages would cross the network in "
            "clear text. Serve on loopback, or give --insecure if this network is private and trusted."
        )
    services = dict(load(s) for s in a.service)
    if a.tls_self_signed and (a.tls_cert or a.tls_key):
        raise ValueError("give --tls-cert and --tls-key, or --tls-self-signed, not both")
    if bool(a.tls_cert) != bool(a.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    limits = {
        k: getattr(a, k) for k in (flag[2:].replace("-", "_") for flag, _, _ in LIMITS) if getattr(a, k) is not None
    }
    from .workflow.cwl.whole import tool_spec

    cwl = [tool_spec(spec) for spec in a.program_cwl]
    server = Server(
        services,
        a.host,
        a.port,
        programs=a.program,
        cwl_programs=cwl,
        workdir=a.workdir,
        keys=a.keys,
        pickle=a.pickle,
        pickle_allow=a.pickle_allow,
        isolation=a.isolation,
        allow_hosts=a.allow_host,
        allow_origins=a.allow_origin,
        fetch_allow=a.fetch_allow,
        cwl_runner=None if a.cwl_runner is None else cwl_runner.command(a.cwl_runner),  # None: the default, warm
        cwl_client_requirements=a.cwl_client_requirements or None,
        tls_cert=a.tls_cert,
        tls_key=a.tls_key,
        tls_self_signed=a.tls_self_signed,
        tls_cert_out=a.tls_cert_out,
        relay=a.relay,
        via_relay=a.via_relay,
        relay_key=_relay_key(a.via_relay),
        tunnel_key=_tunnel_key(a),
        **limits,
    )
    names = (
        list(services)
        + [f"program {p.partition('=')[0].strip()}" for p in a.program]
        + [f"CWL program {n}" for n, _ in cwl]
    )
    made = "a new key written to" if server.key_created else "keys from"
    print(f"mpiws: serving {', '.join(names) or 'no services'} at {server.url}", flush=True)
    from .status import note_endpoint

    note_endpoint(server.url)  # for mpiws status, with no URL
    if a.relay:
        print(f"mpiws: relaying for endpoints that accept no connections, at {server.url}/relay/NAME", flush=True)
    print(f"mpiws: {made} {server.key_file} (clients read it there, or take --key / MPIWS_KEY)", flush=True)
    _tell_certificate(server.endpoint)
    threading.Event().wait()  # until a signal ends the process


def _tell_certificate(endpoint):
    """A self-signed certificate: where it is, its fingerprint, how to trust it."""
    path = endpoint.tls_certificate_file
    if path:
        print(
            f"mpiws: self-signed TLS certificate in {path}\n"
            f"mpiws: SHA-256 fingerprint {endpoint.tls_fingerprint}\n"
            f"mpiws: clients trust it with: export MPIWS_CA_FILE={path}   (or --ca {path})",
            flush=True,
        )


def _run_program(a):
    """(form, program, args) as ``python`` takes them: ``prog.py args``,
    ``-m module args`` or ``-c code args`` (each of -m and -c takes the rest
    of the line, as in python); None if none is given."""
    for form, words, flag in (("module", a.module, "-m"), ("code", a.code, "-c")):
        if words is not None:
            words = words + a.program  # -mMODULE args: the args land in the positional
            if not words:
                raise SystemExit(f"mpiws run: {flag} needs its {form}: mpiws run -n N {flag} {form.upper()} [args]")
            return form, words[0], words[1:]
    return ("path", a.program[0], a.program[1:]) if a.program else None


def _module_missing(name):
    """Why ``python -m name`` in this directory would not find the module
    (``No module named pkg.nope``), looked for without running any of its
    packages' code; None if found, or if only an import could tell (a package
    that extends its ``__path__`` as it is imported is not looked into)."""
    import importlib.machinery
    import importlib.util

    parts = name.split(".")
    sys.path.insert(0, os.getcwd())  # as python -m (and a rank) has it
    try:
        spec = importlib.util.find_spec(parts[0])
        for i in range(1, len(parts)):
            if spec is None:
                break
            if spec.submodule_search_locations is None:
                return f"{'.'.join(parts[:i])} is not a package"
            if spec.origin and spec.origin.endswith("__init__.py"):
                with open(spec.origin, encoding="utf-8", errors="replace") as f:
                    if "__path__" in f.read():  # pkgutil.extend_path and the like: only an import can tell
                        return None
            spec = importlib.machinery.PathFinder.find_spec(
                ".".join(parts[: i + 1]), list(spec.submodule_search_locations)
            )
        else:
            return None if spec is not None else f"No module named {name}"
        return f"No module named {'.'.join(parts[:i])}"
    except Exception:  # noqa: BLE001 - a name python -m would refuse, or a finder that failed: the ranks say why
        return None
    finally:
        sys.path.remove(os.getcwd())


def _missing(form, program):
    """Why ``program`` cannot run, said before any rank starts (as python says
    it: a missing file, status 2; a missing module, status 1), or None."""
    if form == "path" and not os.path.exists(program):
        return f"{program}: no such file", 2
    missing = _module_missing(program) if form == "module" else None
    if missing:
        return f"-m {program}: {missing}", 1
    return None


def _params(text):
    """``--params``: JSON text, read; ValueError naming the flag and what is wrong."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise ValueError(f"--params is not JSON ({e}): give one JSON value, e.g. --params '{{\"n\": 100}}'") from None


def _run(a):
    given = _run_program(a)
    if a.rendezvous or a.slurm:
        if not given:
            raise SystemExit(
                "mpiws run: give the program to run: mpiws run --rendezvous URL ... prog.py [args] (or -m MODULE, -c CODE)"
            )
        if bool(a.tls_cert) != bool(a.tls_key):
            raise SystemExit("mpiws run: --tls-cert and --tls-key go together")
        form, program, args = given
        if a.slurm:
            from .launch.slurm import run_slurm

            return run_slurm(
                program,
                args,
                size=a.size or a.np,
                prefix=a.prefix,
                keep_going=a.keep_going,
                host=a.advertise,
                tls_cert=a.tls_cert,
                tls_key=a.tls_key,
                form=form,
            )
        from .launch.rendezvous import run_rank

        return run_rank(
            program,
            args,
            a.rendezvous,
            size=a.size,
            rank=a.rank,
            host=a.host,
            port=a.port,
            advertise=a.advertise,
            tls_cert=a.tls_cert,
            tls_key=a.tls_key,
            keep_going=a.keep_going,
            relay=a.relay,
            via_relay=a.via_relay,
            form=form,
        )
    if a.endpoints:
        from .launch.remote import run_remote

        if not a.service:
            raise SystemExit("mpiws run --endpoints needs --service NAME")
        params = _params(a.params) if a.params else None
        return run_remote([e.strip() for e in a.endpoints.split(",") if e.strip()], a.service, params, key=a.key)
    from .dashboard import asked_by
    from .launch.local import run_local

    if not given:
        raise SystemExit(
            "mpiws run: give -n N prog.py [args] (or -m MODULE [args], -c CODE [args]), "
            "or --endpoints URL,... --service NAME"
        )
    a.np = 1 if a.np is None else a.np
    if a.np < 1:
        raise SystemExit("mpiws run: -n must be at least 1")
    if bool(a.tls_cert) != bool(a.tls_key):
        raise SystemExit("mpiws run: --tls-cert and --tls-key go together")
    if a.tls_cert:
        os.environ.update(MPIWS_TLS_CERT=os.path.abspath(a.tls_cert), MPIWS_TLS_KEY=os.path.abspath(a.tls_key))
    form, program, args = given
    missing = _missing(form, program)
    if missing:
        print(f"mpiws run: {missing[0]}", file=sys.stderr)
        return missing[1]
    return run_local(
        a.np, program, args, prefix=a.prefix, host=a.host, keep_going=a.keep_going, form=form, dashboard=asked_by(a)
    )


def _inputs(words):
    """``x=1`` a value (or a file's text), ``y:@path`` a local file (uploaded),
    ``y:@http://...`` a URL the job pulls, ``y:@session:NAME`` a file of the job's
    session (an output's too: written there); ``out:NAME[=PATH]`` saves output NAME."""
    from .jobs import File, SessionFile

    inputs, saves = {}, {}
    for w in words:
        if w.startswith("out:"):
            name, _, path = w[4:].partition("=")
            saves[name] = path or name
        elif ":@" in w and ("=" not in w or w.index(":@") < w.index("=")):
            name, _, where = w.partition(":@")
            inputs[name] = SessionFile(where[8:]) if where.startswith("session:") else File(where)
        elif "=" in w:
            name, _, value = w.partition("=")
            inputs[name] = value
        else:
            raise ValueError(f"{w!r}: give NAME=VALUE, NAME:@FILE or out:NAME[=PATH]")
    return inputs, saves


def _usage(a):
    from .jobs import Program

    u = Program(a.url, key=a.key).usage()
    if u.get("class") == "CommandLineTool":  # a CWL tool: its inputs and outputs
        print(f"{u['name']}: CWL CommandLineTool running {' '.join(u['baseCommand'])}")
        for p in u["inputs"]:
            default = f" (default {json.dumps(p['default'])})" if "default" in p else ""
            print(f"  {p['name']:<12} in     {json.dumps(p['type']).strip(chr(34))}{default}")
        for p in u["outputs"]:
            print(f"  {p['name']:<12} out    {json.dumps(p['type']).strip(chr(34))}")
        return 0
    print(f"{u['name']}: {u['template']}")
    for p in u["parameters"]:
        how = {"in": "NAME=VALUE" if p["placement"] == "val" else "NAME=TEXT or NAME:@FILE"}.get(
            p["direction"], "out:NAME[=PATH]"
        )
        print(
            f"  {p['name']:<12} {p['direction']:<6} {p['placement']:<4} {p['type']:<7} {how.replace('NAME', p['name'])}"
        )
    return 0


def _program(a):
    from .jobs import Program, Session

    session = Session(url=a.session, key=a.key) if a.session else None
    return Program(a.url, key=a.key, session=session)


def _call(a):
    inputs, saves = _inputs(a.inputs)
    job = _program(a).spawn(**inputs)
    print(f"mpiws call: job {job.url}", file=sys.stderr, flush=True)
    try:
        status = job.wait()
    except KeyboardInterrupt:
        job.kill()
        raise
    results = job.results(by=a.by)
    for name, path in saves.items():
        print(f"mpiws call: {name} -> {path} ({job.download(name, path)} bytes)", file=sys.stderr)
    print(json.dumps(results, indent=2))
    return 0 if status["state"] == "done" else 1


def _spawn(a):
    inputs, _ = _inputs(a.inputs)
    print(_program(a).spawn(**inputs).url)
    return 0


def _session(a):
    from .jobs import Session

    if a.action == "new":
        print(Session(a.url, key=a.key, disk=a.disk, idle=a.idle).url)
        return 0
    s = Session(url=a.url, key=a.key)
    if a.action == "show":
        print(json.dumps({**s.status(), "files": s.files()}, indent=2))
    elif a.action == "put":  # put SESSION PATH [NAME]: the positionals read the other way round
        print(json.dumps(s.upload(a.name, a.path)))
    elif a.action == "get":
        print(f"mpiws session: {a.name} -> {a.path or a.name} ({s.download(a.name, a.path or a.name)} bytes)")
    elif a.action == "rm":
        s.remove(a.name) if a.name else s.delete()
    return 0


def _job(a):
    from .jobs import Job

    job = Job(a.url, key=a.key)
    if a.kill:
        out = job.kill()
    elif a.results:
        out = job.results(by=a.by)
    else:
        out = job.status(wait=a.wait)
    print(json.dumps(out, indent=2))
    return 0


def _status(a):
    from .status import status

    lines, code = status(a.urls, key=a.key, as_json=a.json)
    print("\n".join(lines))
    return code


def _key(a):
    from .keys import client_key, key_file

    if a.path:
        print(key_file())
        return 0
    key = client_key()
    if key is None:
        print(
            f"mpiws key: no key: MPIWS_KEY is not set and {key_file()} does not exist (mpiws serve creates it)",
            file=sys.stderr,
        )
        return 1
    print(key)
    return 0


def _bench(a):
    from .bench import run_bench

    return run_bench(a.suites, quick=a.quick, ranks=a.ranks, out=a.out, rounds=a.rounds, wan=a.wan)


#: What each command's URL arguments look like, for the message that says what is expected.
URL_ARGS = {
    "usage": {"url": "http://HOST:PORT/programs/NAME"},
    "call": {"url": "http://HOST:PORT/programs/NAME", "session": "http://HOST:PORT/sessions/ID"},
    "spawn": {"url": "http://HOST:PORT/programs/NAME", "session": "http://HOST:PORT/sessions/ID"},
    "job": {"url": "http://HOST:PORT/jobs/ID"},
    "status": {"urls": "http://HOST:PORT"},
    "session": {"url": "http://HOST:PORT/sessions/ID"},
    "run": {
        "endpoints": "http://HOST:PORT",
        "rendezvous": "http://HOST:PORT",
        "via_relay": "http://HOST:PORT/relay/NAME",
    },
    "serve": {"via_relay": "http://HOST:PORT/relay/NAME"},
}


def check_url(text, example="http://HOST:PORT"):
    """``text`` if it is an http(s) URL (read by the core's URL parser), else a
    ValueError saying what is expected: every command that takes a URL checks
    it here before it calls anything, so that ``127.0.0.1:8001`` is not an
    ``invalid format`` from deep inside."""
    from . import _core

    scheme, sep, _ = text.partition("://")
    if not sep:
        hint = f" (http://{text}?)" if text and not text.startswith("/") else ""
        raise ValueError(f"{text!r} is not a URL: give a URL such as {example}{hint}")
    if scheme.lower() not in ("http", "https"):
        raise ValueError(f"{text!r}: mpiws speaks http:// and https:// only: give a URL such as {example}")
    _core.parse_url(text)  # a bad port, a user name, ...: its ValueError names the URL and the fault
    return text


def _check_urls(a):
    """Every URL argument of command ``a`` (``check_url``), before the command runs."""
    examples = dict(URL_ARGS.get(a.command, {}))
    if a.command == "session" and getattr(a, "action", None) == "new":
        examples["url"] = "http://HOST:PORT"
    for attr, example in examples.items():
        value = getattr(a, attr, None)
        if not value:
            continue
        for url in value if isinstance(value, list) else value.split(",") if attr == "endpoints" else [value]:
            if url.strip():
                check_url(url.strip(), example)


class _Version(argparse.Action):
    """``mpiws --version``: the installed distribution's version (looked up only when asked)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from importlib import metadata

        try:
            version = metadata.version("mpiws")
        except metadata.PackageNotFoundError:  # run from a source tree, not installed
            from . import __version__ as version
        print(f"mpiws {version}")
        parser.exit()


def _dashboard_options(parser):
    """``--dashboard`` and ``--dashboard-port``, for a command that serves its run's own page (``mpiws.dashboard``)."""
    parser.add_argument(
        "--dashboard", action="store_true", help="show the run live in a browser: a page on loopback, for your key"
    )
    parser.add_argument("--dashboard-port", type=_port, metavar="PORT", help="its port (default: any free one)")


def _port(text):
    """A port option: 0 (any free port) or 1 to 65535, by the core's parser."""
    from . import _core

    if text == "0":
        return 0
    try:
        return _core.parse_port(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def main(argv=None):
    try:
        return _main(argv)
    except KeyboardInterrupt:  # before a command began (the parser's imports): said as after
        print("mpiws: interrupted", file=sys.stderr)
        return 130


def _main(argv):
    p = argparse.ArgumentParser(prog="mpiws", description="MPI-style message passing between web services.")
    p.add_argument("--version", action=_Version, help="print mpiws's version and exit")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run an endpoint hosting services")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    s.add_argument("--port", type=_port, default=0, help="port (default: any free port)")
    s.add_argument(
        "--service", action="append", default=[], metavar="NAME=module:function", help="deploy a service (repeatable)"
    )
    s.add_argument(
        "--program",
        action="append",
        default=[],
        metavar="NAME=TEMPLATE",
        help="deploy a command-line program, e.g. 'add=./add.sh [in:val:x:int] [out:file:sum:int]' (repeatable)",
    )
    s.add_argument(
        "--program-cwl",
        action="append",
        default=[],
        metavar="[NAME=]TOOL.cwl",
        help="deploy a CWL v1.2 CommandLineTool as a program (NAME: the file's stem by default; repeatable)",
    )
    s.add_argument(
        "--cwl-runner",
        metavar="COMMAND",
        help="the command that runs CWL documents this endpoint's own engine does not (JavaScript, workflows, ...), "
        "each job one run of it in the job's directory (default: this Python's cwltool, if installed, "
        "without containers; 'none': refuse such documents)",
    )
    s.add_argument(
        "--cwl-client-requirements",
        action="store_true",
        help="let a job object given to the CWL runner add requirements of its own (cwl:requirements: the "
        "client's expressions and environment, run here as code): only for an endpoint whose clients are its own user",
    )
    s.add_argument(
        "--workdir",
        help="where jobs and uploaded files are kept (default: a new private temporary directory, "
        "removed at exit); made 0700 if missing, refused if a symlink or writable by others",
    )
    sec = s.add_argument_group("security (docs/security.md)")
    sec.add_argument(
        "--keys",
        metavar="FILE",
        help="keys file: one key per line, optionally with scopes run, jobs, files, "
        "admin, relay, metrics (default: the user's key file, ~/.config/mpiws/key, created with a new key if missing)",
    )
    sec.add_argument("--insecure", action="store_true", help="allow listening on a non-loopback address without TLS")
    sec.add_argument("--tls-cert", metavar="PEM", help="serve https with this certificate chain (with --tls-key)")
    sec.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    sec.add_argument(
        "--tls-self-signed",
        action="store_true",
        help="serve https with a certificate made at start-up for localhost, 127.0.0.1, ::1 and --host",
    )
    sec.add_argument(
        "--tls-cert-out",
        metavar="PEM",
        help="where --tls-self-signed writes its certificate (default: a new temporary file)",
    )
    sec.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a host name requests may be addressed to, besides IP addresses and localhost (repeatable; * for any)",
    )
    sec.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a web page origin allowed to call this endpoint (repeatable; default: none)",
    )
    sec.add_argument(
        "--pickle",
        choices=("restricted", "full"),
        default="restricted",
        help="what services unpickle from peers: plain data and numpy arrays (default), or anything (runs the sender's code)",
    )
    sec.add_argument(
        "--pickle-allow",
        action="append",
        default=[],
        metavar="module.Name",
        help="a type services may also unpickle (repeatable)",
    )
    sec.add_argument(
        "--isolation",
        choices=("process", "thread"),
        default="process",
        help="run each instance in a process of its own (default), or on a thread of this one (faster to start, no isolation)",
    )
    _limit_options(s.add_argument_group("limits (docs/security.md says what each answers)"))
    sec.add_argument(
        "--fetch-allow",
        action="append",
        default=[],
        metavar="HOST[:PORT]|CIDR",
        help="also pull URL inputs from this host or network, though loopback, private or link-local (repeatable)",
    )
    web = s.add_argument_group("across the web (docs/deploy.md)")
    web.add_argument(
        "--relay",
        action="store_true",
        help="also relay: endpoints that accept no connections are reached here, at URL/relay/NAME",
    )
    web.add_argument(
        "--via-relay",
        metavar="URL",
        help="accept no connections from outside: be reached through the relay at URL (http(s)://HOST:PORT/relay/NAME), "
        "registered with MPIWS_RELAY_KEY (else the client key); it prints its URL there pinned with its identity "
        "(URL#sha256=PIN), which clients verify end to end through the relay",
    )
    web.add_argument(
        "--tunnel-key",
        metavar="FILE",
        help="with --via-relay: the private key of this endpoint's identity, which its pin names; made there if missing "
        "(default: tunnel-NAME.key next to the user's key file; --tls-cert/--tls-key, if given, are the identity)",
    )
    s.set_defaults(func=_serve)

    u = sub.add_parser("usage", help="show a deployed program's parameters")
    u.add_argument("url", help="ENDPOINT/programs/NAME")
    u.set_defaults(func=_usage)
    key_help = "endpoint key (default: MPIWS_KEY, else the user's key file)"
    u.add_argument("--key", help=key_help)
    c = sub.add_parser("call", help="run a job of a deployed program and wait for its results")
    c.add_argument("url", help="ENDPOINT/programs/NAME")
    c.add_argument(
        "inputs",
        nargs="*",
        metavar="ARG",
        help="x=1, y:@file (uploaded), y:@http://... (pulled), out:result[=path] (saved)",
    )
    c.add_argument("--by", choices=("value", "reference"), default="value", help="results inline, or as URLs")
    session_help = (
        "run the job in this session (ENDPOINT/sessions/ID: mpiws session new); y:@session:NAME names its files"
    )
    c.add_argument("--session", metavar="URL", help=session_help)
    c.add_argument("--key", help=key_help)
    c.set_defaults(func=_call)
    sp = sub.add_parser("spawn", help="start a job of a deployed program; prints its URL")
    sp.add_argument("url", help="ENDPOINT/programs/NAME")
    sp.add_argument("inputs", nargs="*", metavar="ARG", help="as for call")
    sp.add_argument("--session", metavar="URL", help=session_help)
    sp.add_argument("--key", help=key_help)
    sp.set_defaults(func=_spawn)
    se = sub.add_parser(
        "session",
        help="a session: jobs sharing files on an endpoint (new, show, put, get, rm)",
        usage="%(prog)s new ENDPOINT [--disk BYTES] [--idle SECONDS]\n"
        "       %(prog)s show|rm SESSION\n"
        "       %(prog)s put SESSION PATH [NAME]\n"
        "       %(prog)s get SESSION NAME [PATH]\n"
        "       %(prog)s rm SESSION NAME",
    )
    se.add_argument("action", choices=("new", "show", "put", "get", "rm"))
    se.add_argument("url", help="new: ENDPOINT; else the session's URL (ENDPOINT/sessions/ID)")
    se.add_argument("name", nargs="?", help="put: the local file; get, rm: the session's file")
    se.add_argument("path", nargs="?", help="put: its name in the session; get: where to save it")
    se.add_argument("--disk", type=int, metavar="BYTES", help="new: its disk quota (default: the endpoint's bound)")
    se.add_argument(
        "--idle",
        type=float,
        metavar="SECONDS",
        help="new: removed after this long unused (default: the endpoint's bound)",
    )
    se.add_argument("--key", help=key_help)
    se.set_defaults(func=_session)
    st = sub.add_parser(
        "status",
        help="what endpoints hold and do: services, programs, instances, jobs, sessions, disk, refusals",
        description="With no URL: this user's endpoints running on this machine (mpiws serve notes them). "
        "Instances, jobs, sessions, disk and refusals need a key with `metrics` (or `admin`); domains, `admin`.",
    )
    st.add_argument("urls", nargs="*", metavar="URL", help="endpoints (default: this user's, here)")
    st.add_argument("--json", action="store_true", help="as JSON")
    st.add_argument("--key", help=key_help)
    st.set_defaults(func=_status)
    j = sub.add_parser("job", help="a job's status (or, with --results / --kill, its results / its end)")
    j.add_argument("url", help="ENDPOINT/jobs/ID")
    j.add_argument("--wait", type=float, help="long-poll up to this many seconds for the job to end")
    j.add_argument("--results", action="store_true", help="its results")
    j.add_argument("--by", choices=("value", "reference"), default="value", help="results inline, or as URLs")
    j.add_argument("--kill", action="store_true", help="kill it")
    j.add_argument("--key", help=key_help)
    j.set_defaults(func=_job)

    r = sub.add_parser(
        "run",
        help="run a domain: N local ranks of a script, or a service on endpoints",
        usage="%(prog)s [options] (prog.py | -m MODULE | -c CODE) [args]\n"
        "       %(prog)s --endpoints URL,... --service NAME [options]",
        description="Rank 0 reads this command's standard input as it comes (with --slurm: through "
        "srun; with --rendezvous: its own); the other ranks read none, as with mpiexec.",
    )
    r.add_argument("-n", "-np", dest="np", type=int, help="number of local ranks (default 1; with --slurm: tasks)")
    r.add_argument("-l", "--prefix", action="store_true", help="prefix output lines with the rank")
    r.add_argument("--host", default="127.0.0.1", help="address the local ranks bind")
    r.add_argument(
        "-k",
        "--keep-going",
        action="store_true",
        help="when a rank fails, let the others run on (they see the failure as errors) instead of stopping them",
    )
    # As in python, -m and -c end the options: the rest of the line is the program's.
    r.add_argument(
        "-m",
        dest="module",
        nargs=argparse.REMAINDER,
        help="MODULE [args]: run a library module as the program, as python -m does (the last option)",
    )
    r.add_argument(
        "-c",
        dest="code",
        nargs=argparse.REMAINDER,
        help="CODE [args]: run the program passed as a string, as python -c does (the last option)",
    )
    _dashboard_options(r)
    r.add_argument("--endpoints", help="comma-separated endpoint URLs, one per rank")
    r.add_argument("--service", help="service to run on the endpoints")
    r.add_argument("--params", help="JSON parameters for the service")
    r.add_argument("--key", help=key_help)
    r.add_argument(
        "--slurm",
        action="store_true",
        help="inside a Slurm allocation: one rank per task, started with srun (-n: tasks, default SLURM_NTASKS)",
    )
    r.add_argument(
        "--rendezvous",
        metavar="URL",
        help="be one rank of a domain started by others: register at URL (rank 0 serves it), key from MPIWS_KEY",
    )
    r.add_argument(
        "--size", type=int, help="with --rendezvous: ranks in the domain (default: MPIWS_SIZE, SLURM_NTASKS, ...)"
    )
    r.add_argument(
        "--rank",
        type=int,
        help="with --rendezvous: this rank (default: MPIWS_RANK, SLURM_PROCID, JOB_COMPLETION_INDEX, ...)",
    )
    r.add_argument("--port", type=_port, help="with --rendezvous: port this rank's endpoint binds (rank 0: the URL's)")
    r.add_argument(
        "--advertise", metavar="HOST", help="with --rendezvous or --slurm: the name or address peers reach this rank at"
    )
    r.add_argument(
        "--relay",
        action="store_true",
        help="with --rendezvous: this rank's endpoint also relays for ranks that accept no connections",
    )
    r.add_argument(
        "--via-relay",
        metavar="URL",
        help="with --rendezvous: this rank accepts no connections; peers reach it through the relay at URL (http(s)://HOST:PORT/relay/NAME)",
    )
    r.add_argument(
        "--tls-cert",
        metavar="PEM",
        help="local ranks serve https with this certificate (with --tls-key; trust its CA with --ca)",
    )
    r.add_argument("--tls-key", metavar="PEM", help="the certificate's private key")
    r.add_argument("program", nargs=argparse.REMAINDER, help="script and its arguments")
    r.set_defaults(func=_run)

    k = sub.add_parser(
        "key", help='print the endpoint key clients send (for curl: -H "Authorization: Bearer $(mpiws key)")'
    )
    k.add_argument("--path", action="store_true", help="print where the user's key file is instead")
    k.set_defaults(func=_key)

    b = sub.add_parser("bench", help="run the benchmarks against MPI (mpi4py + MPICH) and write a report")
    b.add_argument(
        "suites",
        nargs="*",
        metavar="SUITE",
        help="pingpong, collectives, overlap, rma, apps, wan, farm, workflows (default: all; the suites are in the "
        "source tree, not in the wheel)",
    )
    b.add_argument("--quick", action="store_true", help="a few minutes in all (what CI runs)")
    b.add_argument("--ranks", help="comma-separated rank counts, for the suites that vary them (farm: worker counts)")
    b.add_argument("--rounds", type=int, help="alternating rounds per measurement")
    b.add_argument(
        "--wan",
        action="store_true",
        help="also the suites' parts behind emulated wide-area links (Toxiproxy; farm: endpoint workers)",
    )
    b.add_argument("--out", help="output directory (default benchmarks/results/bench of the checkout)")
    b.set_defaults(func=_bench)

    from .workflow.command import add_parser as add_workflow

    _dashboard_options(add_workflow(sub))  # `workflow run`: as `run`, its run's own page

    # An endpoint is a client too: of its https peers, and of https job inputs.
    for client in (s, u, c, sp, j, r):
        client.add_argument("--ca", metavar="PEM", help="also trust the certificates in this file (sets MPIWS_CA_FILE)")

    a, extra = p.parse_known_args(argv)
    if extra:
        # argparse gives `inputs` (nargs="*") nothing once an option comes between them and the URL
        # (`mpiws call URL --session S x=1`): the arguments left are those inputs
        if getattr(a, "inputs", None) is None or any(x.startswith("-") for x in extra):
            p.error(f"unrecognized arguments: {' '.join(extra)}")
        a.inputs += extra
    if getattr(a, "ca", None):
        os.environ["MPIWS_CA_FILE"] = os.path.abspath(a.ca)  # read when the core's HTTP client is first made
    try:
        _check_urls(a)
        return a.func(a)
    except KeyboardInterrupt:  # Ctrl-C: one line, and 130 as a shell gives a command ended by SIGINT
        print(f"mpiws {a.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        if not _told(e):
            raise
        print(f"mpiws {a.command}: {e}", file=sys.stderr)
        return 2


def _told(e):
    """Whether a command's error is said in one line (a usage or MPI error), not a traceback."""
    from . import _core

    mpi = sys.modules.get("mpiws.MPI")  # an MPI.Exception comes only from a loaded MPI package; before, a _core.Error
    return isinstance(e, (ValueError, ImportError, AttributeError, TypeError, PermissionError, _core.Error)) or (
        mpi is not None and isinstance(e, mpi.Exception)
    )


if __name__ == "__main__":
    sys.exit(main())
