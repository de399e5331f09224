"""``mpiws run --endpoints URL,... --service NAME``: start a domain of a
deployed service on running endpoints (one rank per URL) and print each
rank's result."""

import json
import sys

from .domain import Domain, said


def run_remote(endpoints, service, params=None, out=None, key=None):
    out = out or sys.stdout
    domain = Domain(endpoints, key=key)
    try:
        domain.start(service, params)
        print(f"domain {domain.domain}: {service} on {domain.size} ranks", file=sys.stderr, flush=True)

        def show(rank, s):
            if s["state"] == "done":
                print(f"rank {rank}: {json.dumps(s['result'])}", file=out, flush=True)
            else:
                print(f"rank {rank}: {s['state']}{said(s, domain)}", file=out, flush=True)

        _statuses, failure = domain.wait(on_result=show)
    except KeyboardInterrupt:  # Ctrl-C: the instances end too, and it is said once
        domain.cancel_all()
        print("mpiws run: interrupted; ranks cancelled", file=sys.stderr, flush=True)
        return 130
    if failure is not None:
        tb = (failure.get("error") or {}).get("traceback")
        if tb:
            sys.stderr.write(tb)
        return 1
    return 0
