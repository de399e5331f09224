#!/usr/bin/env python3
"""The layout is the architecture: fail on any import that points up.

Rust (crates/core/src): every `crate::...` / `super::...` path in a file
(`use` lines, `pub use` re-exports and inline paths, tests included) is an
arrow from the file's layer (its folder, or its own name for a top-level
file) to the layer it names. Each arrow must be one that the block headed
```arrows in docs/architecture.md allows; the allowed arrows themselves must
form no cycle. lib.rs (the map and the facade) is not a layer.

Python (python/mpiws): the ``MPI`` package imports only its own modules, the
binding (``mpiws._core``, ``mpiws.binding``) and modules outside mpiws, at
module level or inside functions; and the imports among mpiws's own modules,
counting those inside functions, form no cycle, except among the files
adapted from mpi4py (listed once, in pyproject.toml's [tool.ruff]
extend-exclude), which keep upstream's shape.

usage: scripts/layers.py            (exit 1 and one line per violation)
"""

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "crates/core/src"
PACKAGE = ROOT / "python/mpiws"


def allowed_arrows():
    """{layer: set of layers it may use}, from docs/architecture.md's arrows block."""
    text = (ROOT / "docs/architecture.md").read_text()
    block = re.search(r"```arrows\n(.*?)```", text, re.S)
    if not block:
        sys.exit("layers: docs/architecture.md has no ```arrows block")
    allowed, leaves = defaultdict(set), set()
    for line in block.group(1).splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("leaves:"):
            leaves.update(line.split(":", 1)[1].split())
            continue
        src, _, dests = line.partition("->")
        allowed[src.strip()].update(dests.split())
    for layer in [*allowed]:
        if layer not in leaves:
            allowed[layer] |= leaves
    return allowed, leaves


def find_cycle(graph):
    """One cycle of `graph` ({node: iterable of nodes}) as a list, or None."""
    state, stack = {}, []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m) :] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def rust_modules():
    """{module path tuple: file} of the core."""
    mods = {}
    for f in CORE.rglob("*.rs"):
        parts = list(f.relative_to(CORE).with_suffix("").parts)
        if parts[-1] in ("mod", "lib"):
            parts = parts[:-1]
        mods[tuple(parts)] = f
    return mods


def rust_violations():
    allowed, leaves = allowed_arrows()
    cycle = find_cycle(allowed)
    if cycle:
        yield f"docs/architecture.md: the allowed arrows make a cycle: {' -> '.join(cycle)}"
    mods = rust_modules()
    layers = {m[0] for m in mods if m}
    for layer in sorted(layers - set(allowed) - leaves):
        yield f"crates/core/src/{layer}: a layer docs/architecture.md's arrows block does not name"
    path_re = re.compile(r"\b(crate|super|self)((?:::\w+)+)")
    for mod, f in sorted(mods.items()):
        if not mod:
            continue  # lib.rs: the map and the facade
        is_mod_file = f.name in ("mod.rs", "lib.rs")
        for n, line in enumerate(f.read_text().splitlines(), 1):
            code = line.split("//")[0]
            for m in path_re.finditer(code):
                head, tail = m.group(1), [p for p in m.group(2).split("::") if p]
                base = list(mod) if is_mod_file else list(mod[:-1])
                if head == "crate":
                    base = []
                elif head == "super":
                    base = base[:-1]
                    while tail and tail[0] == "super":
                        base, tail = base[:-1], tail[1:]
                target = (base + tail)[:1]
                if not target or target[0] == mod[0] or target[0] not in layers:
                    continue
                if target[0] not in allowed.get(mod[0], set()):
                    yield f"{f.relative_to(ROOT)}:{n}: {mod[0]} -> {target[0]} is not an allowed arrow: {line.strip()}"


def adapted_files():
    """The files adapted from mpi4py, as pyproject.toml lists them."""
    text = (ROOT / "pyproject.toml").read_text()
    block = re.search(r"extend-exclude\s*=\s*\[(.*?)\]", text, re.S)
    return {ROOT / p for p in re.findall(r'"([^"]+\.py)"', block.group(1))} if block else set()


def imports_of(name, f, modules):
    """[(mpiws module, line, inside a function)] that module `name` (file `f`) imports."""
    package = name if f.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = []

    def walk(node, in_function):
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")
                    base = base[: len(base) - child.level + 1]
                    prefix = ".".join(base + ([child.module] if child.module else []))
                else:
                    prefix = child.module or ""
                # `from X import y`: y is a module of X if there is one
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in modules else prefix for a in child.names]
            for t in targets:
                while t and t not in modules and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in modules and t != name:
                    found.append((t, child.lineno, in_function))
            walk(child, inner)

    walk(ast.parse(f.read_text(), str(f)), False)
    return found


def python_imports():
    """{module: [(imported mpiws module, line, inside a function)]} for mpiws's own modules."""
    modules = {}
    for f in PACKAGE.rglob("*.py"):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = f
    return modules, {name: imports_of(name, f, modules) for name, f in modules.items()}


def python_violations():
    modules, imports = python_imports()
    binding = {"mpiws._core", "mpiws.binding"}
    for name, found in sorted(imports.items()):
        if name == "mpiws.MPI" or name.startswith("mpiws.MPI."):
            for t, line in sorted({(t, line) for t, line, _ in found}):
                if not (t == "mpiws.MPI" or t.startswith("mpiws.MPI.") or t in binding or t == "mpiws"):
                    yield f"{modules[name].relative_to(ROOT)}:{line}: the MPI package imports {t} (only its own modules and the binding)"
    adapted = adapted_files()
    graph = defaultdict(set)
    for name, found in imports.items():
        for t, _, _ in found:
            if modules[name] in adapted and modules[t] in adapted:
                continue  # mpi4py's own shape
            if t == "mpiws" or name == "mpiws":
                continue  # the package's __init__ re-exports; importing `mpiws` is importing that
            graph[name].add(t)
    cycle = find_cycle(graph)
    if cycle:
        where = []
        for a, b in zip(cycle, cycle[1:]):
            lines = [f"{line}{' (in a function)' if fn else ''}" for t, line, fn in imports[a] if t == b]
            where.append(f"{a} -> {b} at {modules[a].relative_to(ROOT)}:{','.join(lines)}")
        yield "python: an import cycle among mpiws's modules: " + "; ".join(where)


def main():
    problems = [*rust_violations(), *python_violations()]
    for p in problems:
        print(p)
    if problems:
        print(f"layers: {len(problems)} import(s) against the layout (docs/architecture.md)", file=sys.stderr)
        return 1
    print("layers: every import points down (Rust core and Python package)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
