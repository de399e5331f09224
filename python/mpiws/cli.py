"""The ``mpiws`` command line: ``serve`` an endpoint, ``run`` a domain, ``bench`` against MPI."""

import argparse
import json
import signal
import sys
import threading


def _serve(a):
    from .service.serve import Server, load

    services = dict(load(s) for s in a.service)
    server = Server(services, a.host, a.port, max_message=a.max_message, pending_timeout=a.pending_timeout)
    print(f"mpiws: serving {', '.join(services) or 'no services'} at {server.url}", flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    return 0


def _run(a):
    if a.endpoints:
        from .launch.remote import run_remote

        if not a.service:
            raise SystemExit("mpiws run --endpoints needs --service NAME")
        params = json.loads(a.params) if a.params else None
        return run_remote([e.strip() for e in a.endpoints.split(",") if e.strip()], a.service, params)
    from .launch.local import run_local

    if not a.program:
        raise SystemExit("mpiws run: give -n N prog.py [args], or --endpoints URL,... --service NAME")
    if a.np < 1:
        raise SystemExit("mpiws run: -n must be at least 1")
    return run_local(a.np, a.program[0], a.program[1:], prefix=a.prefix, host=a.host, keep_going=a.keep_going)


def _bench(a):
    from .bench import run_bench

    return run_bench(a.suites, quick=a.quick, ranks=a.ranks, out=a.out, rounds=a.rounds)


def main(argv=None):
    p = argparse.ArgumentParser(prog="mpiws", description="MPI-style message passing between web services.")
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("serve", help="run an endpoint hosting services")
    s.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    s.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    s.add_argument("--service", action="append", default=[], metavar="NAME=module:function", help="deploy a service (repeatable)")
    s.add_argument("--max-message", type=int, default=1 << 30, help="largest message body in bytes")
    s.add_argument("--pending-timeout", type=float, default=30.0, help="seconds a message waits for its instance to exist")
    s.set_defaults(func=_serve)

    r = sub.add_parser("run", help="run a domain: N local ranks of a script, or a service on endpoints")
    r.add_argument("-n", "-np", dest="np", type=int, default=1, help="number of local ranks")
    r.add_argument("-l", "--prefix", action="store_true", help="prefix output lines with the rank")
    r.add_argument("--host", default="127.0.0.1", help="address the local ranks bind")
    r.add_argument("-k", "--keep-going", action="store_true",
                   help="when a rank fails, let the others run on (they see the failure as errors) instead of stopping them")
    r.add_argument("--endpoints", help="comma-separated endpoint URLs, one per rank")
    r.add_argument("--service", help="service to run on the endpoints")
    r.add_argument("--params", help="JSON parameters for the service")
    r.add_argument("program", nargs=argparse.REMAINDER, help="script and its arguments")
    r.set_defaults(func=_run)

    b = sub.add_parser("bench", help="run the benchmarks against MPI (mpi4py + MPICH) and write a report")
    b.add_argument("suites", nargs="*", metavar="SUITE", help="pingpong, collectives, overlap, apps (default: all)")
    b.add_argument("--quick", action="store_true", help="a few minutes in all (what CI runs)")
    b.add_argument("--ranks", help="comma-separated rank counts, for the suites that vary them")
    b.add_argument("--rounds", type=int, help="alternating rounds per measurement")
    b.add_argument("--out", help="output directory (default benchmarks/results/bench)")
    b.set_defaults(func=_bench)

    a = p.parse_args(argv)
    from .MPI import Exception as MPIException

    try:
        return a.func(a)
    except (MPIException, ValueError, ImportError, AttributeError, TypeError) as e:
        print(f"mpiws {a.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
