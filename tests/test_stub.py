"""The typed stub of ``mpiws.MPI`` (python/mpiws/MPI/__init__.pyi) stays true.

- every public name of ``mpiws.MPI`` is in the stub and every public name of
  the stub is in ``mpiws.MPI``; the same for each class's public members;
- mypy's stubtest finds no difference between the stub and the runtime but
  the allowlisted ones (tests/stub_allowlist.txt), and the allowlisted
  methods' signatures are checked here instead;
- the stub type-checks a small program using it, and rejects wrong calls.

The name checks read the stub with ``ast`` and need nothing but the
package; stubtest and the sample programs need mypy (the ``test`` extra),
and are skipped without it.
"""

import ast
import builtins
import inspect
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from mpiws import MPI

ROOT = Path(__file__).resolve().parent.parent
STUB = ROOT / "python" / "mpiws" / "MPI" / "__init__.pyi"
CORE_STUB = ROOT / "python" / "mpiws" / "_core.pyi"
ALLOWLIST = ROOT / "tests" / "stub_allowlist.txt"


def _public(name):
    return not name.startswith("_")


# ---- the stub, read with ast -------------------------------------------------


def _body_names(body):
    """Names a stub block defines (``if`` blocks included: version checks)."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names[t.id] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if a.asname is not None:  # a stub re-exports only `import x as x`
                    names[a.asname] = node
        elif isinstance(node, ast.If):
            names.update(_body_names(node.body))
            names.update(_body_names(node.orelse))
    return names


def _stub_module(path=STUB):
    return _body_names(ast.parse(path.read_text()).body)


STUB_NAMES = _stub_module()
STUB_CLASSES = {n: node for n, node in STUB_NAMES.items() if isinstance(node, ast.ClassDef)}


def _stub_members(class_name):
    """A stub class's member names, its stub bases' included."""
    node = STUB_CLASSES[class_name]
    members = set(_body_names(node.body))
    for base in node.bases:
        name = base.id if isinstance(base, ast.Name) else None
        if name in STUB_CLASSES:
            members |= _stub_members(name)
        elif name == "_Memory":  # mpiws._core.Memory, from the core's own stub
            members |= set(_body_names(_stub_module(CORE_STUB)["Memory"].body))
        elif name is not None and hasattr(builtins, name):  # RuntimeError: typeshed's
            members |= set(dir(getattr(builtins, name)))
        else:
            raise AssertionError(f"stub class {class_name}: unknown base {ast.unparse(base)}")
    return members


def _stub_alias(name):
    """The stub class ``name`` is an alias of (``memory = buffer``), else ``name``."""
    node = STUB_NAMES[name]
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name):
        return node.value.id
    return name


# ---- the runtime -------------------------------------------------------------


def _runtime_public():
    return {n for n in dir(MPI) if _public(n)}


def _is_submodule(name):
    """A submodule of mpiws.MPI, which ``dir`` shows once imported: package
    structure, not declared in the stub (see its last comment)."""
    value = getattr(MPI, name)
    return isinstance(value, types.ModuleType) and value.__name__ == f"{MPI.__name__}.{name}"


# ---- names -------------------------------------------------------------------


def test_every_public_runtime_name_is_in_the_stub():
    missing = sorted(n for n in _runtime_public() - set(STUB_NAMES) if not _is_submodule(n))
    assert not missing, f"in mpiws.MPI but not in {STUB.name}: {missing}"


def test_every_public_stub_name_is_at_runtime():
    extra = sorted(n for n in STUB_NAMES if _public(n) and not hasattr(MPI, n))
    assert not extra, f"in {STUB.name} but not in mpiws.MPI: {extra}"


def test_all_lists_the_public_names():
    """``mpiws.MPI.__all__`` (what ``from mpiws.MPI import *`` gives) is
    exactly the runtime's public names, each once."""
    duplicates = sorted({n for n in MPI.__all__ if MPI.__all__.count(n) > 1})
    assert not duplicates, f"twice in mpiws.MPI.__all__: {duplicates}"
    public = {n for n in _runtime_public() if not _is_submodule(n)}
    assert not set(MPI.__all__) - public, f"in __all__ but not public in mpiws.MPI: {sorted(set(MPI.__all__) - public)}"
    assert not public - set(MPI.__all__), f"public in mpiws.MPI but not in __all__: {sorted(public - set(MPI.__all__))}"


def test_the_namespace_holds_no_submodules():
    """As mpi4py's extension module, mpiws.MPI's namespace holds no modules
    (its package's submodules are removed from it), so the stub declares
    none and mpi4py's test_doc walk stays within the API."""
    import types

    assert not [n for n, v in vars(MPI).items() if isinstance(v, types.ModuleType)]
    import mpiws.MPI.datatype as datatype  # still importable by name

    assert datatype.Datatype is MPI.Datatype


def test_private_helpers_in_the_stub_are_at_runtime():
    """The stub's private functions and constants (mpi4py's helpers that
    mpi4py.util uses) are the runtime's; its private types and aliases are
    the stub's own (protocols, buffer specifications)."""
    for name, node in STUB_NAMES.items():
        if _public(name) or name in ("_T",) or isinstance(node, ast.ClassDef):
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or (
            isinstance(node, ast.AnnAssign) and "TypeAlias" not in ast.unparse(node.annotation)
        ):
            assert hasattr(MPI, name), f"{name} is in the stub but not in mpiws.MPI"


def _stub_instance_attributes(class_name):
    """The bare annotations of a stub class (``ierr: int``): attributes its
    instances have, which the class itself need not show."""
    return {
        n
        for n, node in _body_names(STUB_CLASSES[class_name].body).items()
        if isinstance(node, ast.AnnAssign) and node.value is None
    }


def _message_receipt():
    """A ``Receipt`` as a message handler gets it (``Comm.on_message``, on a
    duplicate of COMM_SELF: this process's own singleton domain)."""
    import threading

    comm = MPI.COMM_SELF.Dup()
    got, arrived = [], threading.Event()

    def handler(receipt):
        got.append(receipt)
        arrived.set()

    try:
        comm.on_message(handler, tag=3)
        comm.send("hello", 0, tag=3)
        assert arrived.wait(30), "no message receipt within 30 s"
    finally:
        comm.off_message(handler, tag=3)
        comm.Free()
    return got[0]


def test_class_members():
    """Each public class has in the stub exactly the public members it has at
    runtime, inherited ones included; the stub's instance attributes are an
    instance's."""
    instances = {"Exception": MPI.Exception(MPI.ERR_ARG, "message"), "Receipt": _message_receipt()}
    problems = []
    for name in sorted(_runtime_public()):
        cls = getattr(MPI, name)
        if not isinstance(cls, type) or name not in STUB_NAMES:
            continue
        stub_class = _stub_alias(name)
        if stub_class not in STUB_CLASSES:  # MPIException = Exception: an alias
            stub_class = _stub_alias(stub_class)
        stub = {m for m in _stub_members(stub_class) if _public(m)}
        runtime = {m for m in dir(cls) if _public(m)}
        if stub_class in instances:
            runtime |= {m for m in _stub_instance_attributes(stub_class) if hasattr(instances[stub_class], m)}
        if runtime - stub:
            problems.append(f"{name}: not in the stub: {sorted(runtime - stub)}")
        if stub - runtime:
            problems.append(f"{name}: not at runtime: {sorted(stub - runtime)}")
    assert not problems, "\n".join(problems)


def test_receipt_fields():
    """A receipt has exactly the fields the stub gives ``Receipt``."""
    receipt = _message_receipt()
    assert set(receipt._d) == _stub_instance_attributes("Receipt")


def test_constants_have_their_class():
    """Each ``NAME: Final[T]`` of the stub is a T at runtime (int, str,
    Datatype, Op, Intracomm, ...)."""
    wrong = []
    for name, node in STUB_NAMES.items():
        if not (_public(name) and isinstance(node, ast.AnnAssign)):
            continue
        ann = node.annotation
        if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) == "Final"):
            continue
        expected = ast.unparse(ann.slice)
        value = getattr(MPI, name)
        cls = getattr(builtins, expected, None) if expected in ("int", "str") else getattr(MPI, expected, None)
        if expected.startswith("dict["):
            cls = dict
        if cls is None or type(value) is not cls:
            wrong.append(f"{name}: {expected} in the stub, {type(value).__name__} at runtime")
    for name, node in STUB_NAMES.items():  # SUBMITTED: Final = "submitted"
        if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "Final" and node.value is not None:
            if getattr(MPI, name) != ast.literal_eval(node.value):
                wrong.append(f"{name}: {ast.unparse(node.value)} in the stub, {getattr(MPI, name)!r} at runtime")
    assert not wrong, "\n".join(wrong)


# ---- signatures stubtest cannot see ----------------------------------------------


def _stub_method(class_name, name):
    """The stub's definition of method ``name`` as class ``class_name`` has it."""
    node = STUB_CLASSES[class_name]
    own = _body_names(node.body)
    if name in own:
        return own[name]
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in STUB_CLASSES:
            found = _stub_method(base.id, name)
            if found is not None:
                return found
    return None


def _stub_params(fn):
    """(positional parameters as (name, has default), keyword-only names)."""
    a = fn.args
    pos = a.posonlyargs + a.args
    defaults = [False] * (len(pos) - len(a.defaults)) + [True] * len(a.defaults)
    positional = [(p.arg, d) for p, d in zip(pos, defaults)][1:]  # without self
    return positional, [p.arg for p in a.kwonlyargs]


def _factory_made():
    """(class name, method name) of every public method made by a collective
    factory: a wrapper with ``__wrapped__`` (functools.wraps)."""
    out = []
    for class_name in ("Comm", "Intracomm", "Intercomm", "Topocomm", "Cartcomm", "Graphcomm", "Distgraphcomm"):
        cls = getattr(MPI, class_name)
        for name in dir(cls):
            static = inspect.getattr_static(cls, name)
            if _public(name) and isinstance(static, types.FunctionType) and hasattr(static, "__wrapped__"):
                out.append((class_name, name))
    return out


def test_factory_made_signatures():
    """For the methods stubtest sees through ``functools.wraps`` (the
    allowlisted collectives): the stub's positional parameters are the
    wrapped function's (names, which have defaults), its keyword-only ones
    the wrapper's (``timeout``, ``schedule``, ``info``)."""
    made = _factory_made()
    assert len(made) > 100, made  # every communicator class's collectives
    problems = []
    for class_name, name in made:
        method = getattr(getattr(MPI, class_name), name)
        stub = _stub_method(class_name, name)
        if stub is None:
            problems.append(f"{class_name}.{name}: not in the stub")
            continue
        wrapped = list(inspect.signature(method).parameters.values())[1:]
        runtime_pos = [(p.name, p.default is not p.empty) for p in wrapped]
        wrapper = inspect.signature(method, follow_wrapped=False).parameters.values()
        runtime_kw = [p.name for p in wrapper if p.kind is p.KEYWORD_ONLY]
        stub_pos, stub_kw = _stub_params(stub)
        if stub.args.vararg is not None:  # Intercomm's scan & co.: undefined there, (*args, **kwargs)
            problems.append(f"{class_name}.{name}: the stub takes *args, the runtime's wrapper reads {runtime_pos}")
        if stub_pos != runtime_pos:
            problems.append(f"{class_name}.{name}: positional {stub_pos} in the stub, {runtime_pos} at runtime")
        if sorted(stub_kw) != sorted(runtime_kw):
            problems.append(f"{class_name}.{name}: keyword-only {stub_kw} in the stub, {runtime_kw} at runtime")
    assert not problems, "\n".join(problems)


def test_async_forms():
    """Each awaitable ``a...`` form (an ``async (*args, **kwargs)`` wrapper
    forwarding to ``i...``) has in the stub its ``i...`` form's parameters."""
    forms = [n for n in dir(MPI.Comm) if _public(n) and inspect.iscoroutinefunction(getattr(MPI.Comm, n))]
    assert forms
    problems = []
    for name in forms:
        stub = _stub_method("Comm", name)
        target = _stub_method("Comm", "i" + name[1:])
        if not isinstance(stub, ast.AsyncFunctionDef):
            problems.append(f"Comm.{name}: not an async def in the stub")
        elif target is None or _stub_params(stub) != _stub_params(target):
            problems.append(f"Comm.{name}: its parameters are not Comm.i{name[1:]}'s")
    assert not problems, "\n".join(problems)


# ---- mypy --------------------------------------------------------------------------

# stubtest, told to check the stub of mpiws.MPI only. It has no option for
# that, so its ``build_stubs`` is called with ``find_submodules=False``:
# otherwise it also takes each submodule's .py file (MPI/comm.py, ...) for
# a stub of itself, fails on their untyped code, and sees the runtime's
# classes (whose __module__ is their submodule) as other types than the
# stub's. (Should mypy rename that function, this test fails loudly.)
_STUBTEST = """
import sys
import mypy.stubtest as stubtest
build = stubtest.build_stubs
stubtest.build_stubs = lambda modules, options, find_submodules=False: build(modules, options, find_submodules=False)
sys.exit(stubtest.test_stubs(stubtest.parse_options(sys.argv[1:])))
"""


def _mypy_env():
    return dict(os.environ, MYPY_FORCE_COLOR="0", NO_COLOR="1")


def test_stubtest(tmp_path):
    pytest.importorskip("mypy.stubtest", reason="mypy (the test extra) is not installed")
    proc = subprocess.run(
        [sys.executable, "-c", _STUBTEST, "mpiws.MPI", "--allowlist", str(ALLOWLIST), "--concise"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=_mypy_env(),
    )
    assert proc.returncode == 0, f"stubtest:\n{proc.stdout}\n{proc.stderr}"


def _mypy(tmp_path, code, *options):
    """mypy --strict on ``code``: (exit status, output lines)."""
    program = tmp_path / "program.py"
    program.write_text(textwrap.dedent(code))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            os.devnull,
            "--python-executable",
            sys.executable,
            *options,
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=_mypy_env(),
    )
    return proc.returncode, (proc.stdout + proc.stderr).splitlines()


SAMPLE = """
    import asyncio

    import numpy as np

    from mpiws import MPI

    comm = MPI.COMM_WORLD
    rank: int = comm.Get_rank()
    size: int = comm.size
    peer = (rank + 1) % size

    # objects
    comm.send({"step": 1}, dest=peer, tag=7)
    status = MPI.Status()
    got = comm.recv(source=MPI.ANY_SOURCE, tag=7, status=status, timeout=5.0)
    source: int = status.Get_source()
    nbytes: int = status.Get_count()
    everyone: list[object] = comm.allgather(rank)
    total = comm.reduce(rank, op=MPI.SUM, root=0)
    biggest = comm.allreduce(rank, MPI.MAX, timeout=2)
    squares = comm.allreduce(rank, op=lambda a, b: a + b)
    first = comm.bcast(got if rank == 0 else None, root=0)

    # buffers
    data = np.arange(10, dtype="d")
    out = np.empty(10)
    request: MPI.Request = comm.Isend(data, dest=peer, tag=1)
    handled = MPI.Schedule(completed=lambda r: print(r.event, r.size, r.time), failed=lambda r: print(r.error))
    other = comm.Isend([data, MPI.DOUBLE], peer, 2, timeout=1.5, schedule=handled)
    request.on(MPI.MATCHED, lambda receipt: None).on("timed_out", print)
    comm.Recv([out, 10, MPI.DOUBLE], source=MPI.ANY_SOURCE, tag=1)
    comm.Irecv(out, peer, 2).Wait(status, timeout=3)
    done: bool = MPI.Request.Waitall([request, other])
    comm.Allreduce(MPI.IN_PLACE, out, op=MPI.SUM)
    comm.Allreduce(data, out, MPI.PROD, timeout=None)
    comm.Bcast([out, MPI.DOUBLE], root=0)
    comm.Gather(data, out if rank == 0 else None, root=0)
    pending = comm.Ireduce(data, out, op=MPI.MIN, root=0, schedule=handled)
    pending.Wait()
    persistent = comm.Allreduce_init(data, out, op=MPI.SUM, info=MPI.INFO_NULL)
    persistent.Start()
    persistent.Wait()
    comm.Set_timeout(30.0)
    limit: float | None = comm.Get_timeout()

    # datatypes
    column = MPI.DOUBLE.Create_vector(2, 1, 4).Commit()
    extent: int = column.extent
    lb, ext = column.Get_extent()
    comm.Send([data, 1, column], dest=peer)
    column.Free()
    struct = MPI.Datatype.Create_struct([1, 1], [0, 8], [MPI.DOUBLE, MPI.INT])
    struct.Free()

    # one-sided
    memory = np.zeros(4)
    win = MPI.Win.Create(memory, disp_unit=memory.itemsize, comm=comm)
    win.Fence()
    win.Put(data[:4], peer, target=(0, 4, MPI.DOUBLE))
    win.Accumulate([data[:4], MPI.DOUBLE], peer, op=MPI.SUM)
    win.Fence()
    win.Free()
    shared = MPI.Win.Allocate(64, 8)
    view: MPI.buffer = shared.tomemory()
    shared.Free()

    # topologies, groups, errors
    cart = comm.Create_cart(MPI.Compute_dims(size, 2), periods=[True, False])
    left, right = cart.Shift(0, 1)
    halo: list[object] = cart.neighbor_allgather(rank)
    group = comm.Get_group().Incl([0])
    sub = comm.Create(group)
    if sub != MPI.COMM_NULL:
        sub.Free()
    try:
        comm.recv(source=peer, timeout=0.1)
    except MPI.Exception as e:
        if e.Get_error_class() == MPI.ERR_TIMEOUT:
            print(e.error_string)
    t0: float = MPI.Wtime()


    async def main() -> None:
        value = await comm.arecv(source=peer)
        await comm.abarrier()
        result = await comm.iallreduce(rank, op=MPI.SUM)
        print(value, result)


    asyncio.run(main())
"""


def test_the_stub_types_a_program(tmp_path):
    pytest.importorskip("mypy", reason="mypy (the test extra) is not installed")
    pytest.importorskip("numpy")
    status, lines = _mypy(tmp_path, SAMPLE)
    assert status == 0, "\n".join(lines)


WRONG = """
    import numpy as np

    from mpiws import MPI

    comm = MPI.COMM_WORLD
    comm.send({"a": 1})  # E: no dest
    comm.Get_rank() + "1"  # E: an int
    MPI.Request.Waitall(comm)  # E: not requests
    comm.Isend(np.zeros(3), 0, schedule=print)  # E: not a Schedule
    comm.Bcast(np.zeros(3), 0, 5.0)  # E: timeout is keyword-only
    comm.Isend(b"x", 0).on("done", print)  # E: no such event
    MPI.DOUBLE.Create_vector(2, 1)  # E: no stride
    MPI.Win.Create(np.zeros(4), comm=MPI.Group())  # E: not a communicator
    MPI.COMM_WORLD = comm  # E: a constant
    comm.Allreduce(np.zeros(3), np.zeros(3), op=max)  # E: buffers take an MPI.Op
    rank: str = comm.rank  # E: an int
    comm.no_such_method()  # E: not in the API
"""


# From Python 3.12 a buffer is what has ``__buffer__`` (before, the stub's
# buffer protocol is empty, as mpi4py's: any object passes for a buffer).
WRONG_BUFFERS = """
    import numpy as np

    from mpiws import MPI

    comm = MPI.COMM_WORLD
    comm.Send(np.zeros(3), 0)
    comm.Send(bytearray(3), 0)
    comm.Send([memoryview(b"abc"), MPI.BYTE], 0)
    comm.Send(object(), 0)  # E: not a buffer
    comm.Isend("text", 0)  # E: not a buffer
    MPI.Win.Create(3.0)  # E: not a buffer
"""


@pytest.mark.parametrize(
    "code, options", [(WRONG, ()), (WRONG_BUFFERS, ("--python-version", "3.12"))], ids=["calls", "buffers"]
)
def test_the_stub_rejects_wrong_calls(tmp_path, code, options):
    pytest.importorskip("mypy", reason="mypy (the test extra) is not installed")
    pytest.importorskip("numpy")
    status, lines = _mypy(tmp_path, code, *options)
    code = textwrap.dedent(code).splitlines()
    expected = {i + 1 for i, line in enumerate(code) if "# E:" in line}
    reported = {int(line.split(":")[1]) for line in lines if ": error:" in line}
    assert status == 1
    assert reported == expected, "\n".join(
        [f"expected errors on lines {sorted(expected)}, mypy reported {sorted(reported)}:"] + lines
    )
