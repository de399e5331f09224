"""``MPI.pickle``: the one serializer of object messages and collectives,
swappable as in mpi4py, and kept per instance, so that services sharing an
endpoint process do not change each other's (docs/security.md)."""

import json
import pickle
import secrets
import threading

from mpiws import MPI, _core, binding


def test_a_serializer_put_in_carries_messages_and_is_undone():
    try:
        MPI.pickle.__init__(lambda o: json.dumps(o).encode(), lambda b: json.loads(bytes(b)))
        assert MPI.pickle.dumps({"a": [1]}) == b'{"a": [1]}'
        assert MPI.COMM_SELF.sendrecv({"a": [1]}, 0, 0, None, 0, 0) == {"a": [1]}
        assert MPI.COMM_SELF.allgather([3]) == [[3]]
        MPI.pickle.__init__(protocol=2)
        assert MPI.pickle.PROTOCOL == 2 and pickle.loads(MPI.pickle.dumps((1, 2))) == (1, 2)
    finally:
        MPI.pickle.__init__()
    assert MPI.pickle.PROTOCOL == pickle.HIGHEST_PROTOCOL


def test_each_instance_keeps_its_own_serializer():
    ep = _core.Endpoint()
    seen = {}

    def service(name, dumps):
        inst = ep.create_instance("d-" + secrets.token_hex(4), 0, [ep.url], secrets.token_hex(8))
        with binding.bound_to(inst):
            if dumps:
                MPI.pickle.__init__(dumps, json.loads)
            barrier.wait()
            seen[name] = MPI.pickle.dumps([1])

    barrier = threading.Barrier(2)
    threads = [
        threading.Thread(target=service, args=("json", lambda o: json.dumps(o).encode())),
        threading.Thread(target=service, args=("default", None)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["json"] == b"[1]" and pickle.loads(seen["default"]) == [1]
