"""``mpiws serve``: one endpoint, any number of deployed services.

A service is a function ``f(comm, params) -> result``: ``comm`` is the
instance's COMM_WORLD, ``params`` the domain's JSON parameters, and the
result must be JSON-serialisable. A program is a command-line program made
a service by its one-line template (``NAME=TEMPLATE``; see ``mpiws.jobs``),
or by a CWL CommandLineTool document (``cwl_programs``: the endpoint builds
each job's command line from it).

Objects that peers and clients send a service are unpickled by a
restricted unpickler (``mpiws.MPI.pickled``): builtins, numpy arrays and the
types the deployer names (``pickle_allow``); ``pickle="full"`` trusts every
sender with arbitrary code, as mpi4py does.
"""

import json
import threading

from .. import _core, keys as keyfiles
from ..MPI import pickled
from . import cwl_runner, sandbox
from .names import load  # noqa: F401  (mpiws serve --service NAME=module:function: cli.py)
from .runner import fail_to_start, run_instance


class Server:
    """An endpoint that starts each instance of its services.

    ``isolation``: ``"process"`` (the default) runs each instance in a
    process of its own (``mpiws.service.sandbox``; services must then be
    module-level functions), bounded by ``max_instance_memory`` (bytes) and
    ``max_instance_time`` (seconds); ``"thread"`` runs instances on threads
    of this process, which is faster to start but shares one interpreter.
    ``keys``: a keys file's path (``--keys``), or None for the user's key
    file (created with a new key if missing: ``mpiws.keys``); ``key`` is
    then the first of them, for this process's own clients. ``pickle`` and
    ``pickle_allow``: what services may unpickle (see the module's doc).
    ``cwl_programs``: (name, CWL document as a dict or JSON text) pairs, deployed as
    programs (``mpiws.workflow.cwl.whole.tool_spec`` reads one); what the
    endpoint's own engine does not run, ``cwl_runner`` (a command as a list;
    default: ``cwl_runner.command()``, with its fork server) runs.
    Other keyword arguments are the endpoint's limits (``_core.Endpoint``).
    """

    def __init__(
        self,
        services,
        host="127.0.0.1",
        port=0,
        programs=(),
        keys=None,
        pickle="restricted",
        pickle_allow=(),
        isolation="process",
        cwl_programs=(),
        **limits,
    ):
        self.services = dict(services)
        if limits.get("cwl_runner") is None:  # cwltool, and its fork server unless one is given
            limits["cwl_runner"] = cwl_runner.command()
            if limits.get("cwl_runner_wire") is None:
                limits.setdefault("cwl_runner_forks", cwl_runner.forks_command())
        text, self.key_file, self.key_created = keyfiles.server_keys(keys)
        self.key = keyfiles.first_key(text)
        self.loads = pickled.policy(pickle, pickle_allow)
        if isolation == "process":
            limits["sandbox"] = sandbox.command(
                self.services, pickle, pickle_allow, limits.get("max_message"), limits.get("body_timeout")
            )
        elif isolation != "thread":
            raise ValueError(f"isolation must be 'process' or 'thread', got {isolation!r}")
        self.endpoint = _core.Endpoint(host, port, keys=text, **limits)
        for name in self.services:
            self.endpoint.deploy(name)
        for spec in programs:
            name, sep, template = spec.partition("=")
            if not sep:
                raise ValueError(f"program must be NAME=TEMPLATE, got {spec!r}")
            self.endpoint.deploy_program(name.strip(), template)
        for name, document in cwl_programs:  # (name, the document as a dict, or as JSON text)
            self.endpoint.deploy_program_cwl(name, document if isinstance(document, str) else json.dumps(document))
        self._stop = threading.Event()
        # On threads, a dispatcher starts each instance; in processes the endpoint does.
        self._thread = None
        if isolation == "thread":
            self._thread = threading.Thread(target=self._dispatch, name="mpiws-dispatch", daemon=True)
            self._thread.start()

    @property
    def url(self):
        return self.endpoint.url

    def _dispatch(self):
        while not self._stop.is_set():
            instance = self.endpoint.next_run(0.5)
            if instance is None:
                continue
            fn = self.services[instance.service]
            thread = threading.Thread(
                target=run_instance,
                args=(instance, fn, self.loads, True),
                name=f"mpiws-{instance.domain}-{instance.rank}",
                daemon=True,
            )
            try:
                thread.start()
            except RuntimeError as e:  # no thread to be had: the instance fails, the dispatcher goes on
                fail_to_start(instance, e)

    def stop(self):
        self._stop.set()
        if self._thread:
            self._thread.join()
        self.endpoint.close()  # its port is free, its jobs and spares end, what it made is removed
