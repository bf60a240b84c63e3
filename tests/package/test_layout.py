"""The package's shape: the layer table, no import cycles, the old paths and the facade.

The layer table (which layer may import which); no import cycle between modules of
src/smg_fast; the old flat paths (smg_fast.shm, smg_fast.rdma ...) deprecated aliases of the
very same module objects as their new homes in smg_fast.transport; the facade
smg_fast.transport.

Imports are read with ast, lazy ones (inside functions) included: a lazy import still ties two
modules together, it only hides the cycle until the function runs."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "smg_fast"
MAX_LINES = 450
_nothing = contextlib.nullcontext

# Old flat path -> new home. Each old path must be the very same module object.
COMPAT = {
    "smg_fast.config": "smg_fast.processors.config",
    "smg_fast.routing.errors": "smg_fast.routing.routed_error",
    "smg_fast.shm": "smg_fast.transport.shm",
    "smg_fast.shm_pool": "smg_fast.transport.shm_pool",
    "smg_fast.shm_owner": "smg_fast.transport.shm_owner",
    "smg_fast.tensors": "smg_fast.transport.tensors",
    **{f"smg_fast.rdma.{m}": f"smg_fast.transport.rdma.{m}"
       for m in ("descriptor", "errors", "exporter", "nixl", "notifier", "preflight", "puller")},
}


# The layer table (docs/architecture.md): each layer's modules, named under smg_fast (a package
# covers its submodules; "" is smg_fast/__init__.py itself), and the layers it may import
# besides its own. Imaging and the core stand below the processors; transport below the
# server and the clients; _service (what the server and the router share) below both; the
# server and the routing library or the router process never import each other; nothing
# imports upward. A new module belongs to a layer here before it is imported.
LAYERS: dict[str, tuple[str, ...]] = {
    "core": ("_native", "_native_version", "_version", "_dtypes", "_env", "errors", "resample",
             "compact"),
    "proto": ("_proto",),
    "imaging": ("imaging", "video"),
    "processors": ("processors",),
    "transport": ("transport",),
    "api": ("", "hf", "hf_compat", "hf_video"),
    "compat": ("_deprecated", "shm", "shm_pool", "shm_owner", "tensors", "rdma", "config",
               "routing.errors"),
    "integrations": ("integrations",),
    "_service": ("_service",),
    "client": ("client", "client_messages"),
    "server": ("server",),
    "routing": ("routing",),
    "router": ("router",),
    "testing": ("testing", "bench"),  # the harness, and the shipped tools built on it
    "cli": ("__main__",),
}
_LIBRARY = {"core", "proto", "imaging", "processors", "transport", "api"}
# Deprecated names' forwards, the only imports against the table (lazy, until REMOVED_IN):
# smg_fast.errors' wire names now live in smg_fast._service.wire.
DEPRECATED_FORWARDS = {("smg_fast.errors", "smg_fast._service.wire"),
                       ("smg_fast.errors", "smg_fast._deprecated")}
MAY_IMPORT: dict[str, set[str]] = {
    "core": set(),
    "proto": set(),
    "imaging": {"core"},
    "processors": {"core", "imaging"},
    "transport": {"core", "proto"},
    "api": {"core", "imaging", "processors"},
    "compat": {"transport", "processors", "routing"},
    "integrations": {"core", "imaging", "processors", "api"},
    "_service": {"core", "proto"},
    "client": _LIBRARY | {"_service"},
    "server": _LIBRARY | {"_service"},
    "routing": {"core", "proto", "imaging", "transport", "_service", "client"},
    "router": {"core", "proto", "_service", "routing"},
    "testing": set(LAYERS) - {"testing", "cli"},
    "cli": _LIBRARY | {"integrations"},
}


def layer_of(module: str) -> str | None:
    """The layer whose entry names module or the package holding it (the longest such name)."""
    best, found = -1, None
    for layer, names in LAYERS.items():
        for name in names:
            full = f"{PACKAGE}.{name}" if name else PACKAGE
            if (module == full or (name and module.startswith(full + "."))) \
                    and len(full) > best:
                best, found = len(full), layer
    return found


def module_names(root: Path, package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module under root/package.

    Every .py and extension module; a package is its __init__."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    # extension modules are leaves: built (name.<abi>.so), or known by their stub (name.pyi)
    # in a source tree where the build went elsewhere (site-packages, as in CI)
    for path in [*(root / package).rglob("*.so"), *(root / package).rglob("*.pyi")]:
        rel = path.relative_to(root)
        out.setdefault(".".join([*rel.parent.parts, path.name.split(".")[0]]), path)
    return out


def import_graph(root: Path, package: str,
                 missing: list[str] | None = None) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (anywhere in its body).

    ``from X import y`` counts as importing X.y when that is a module, else X; a package's own
    submodules being loaded through it (the implicit parent import) is not an edge. Imports of the
    package's modules that do not exist (a relative import one level off) go to ``missing``."""
    mods = module_names(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        if path.suffix in (".so", ".pyi"):
            graph[name] = set()
            continue
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
                wanted = targets
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base_parts = here[:len(here) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
                wanted = [base]
            else:
                continue
            if missing is not None:
                missing += [f"{name}:{node.lineno} imports {w}" for w in wanted
                            if w.split(".")[0] == package and w not in mods]
            for t in targets:
                while t and t not in mods:  # import a.b.c of a module a.b: the module a.b
                    t = t.rpartition(".")[0]
                if t and t != name:
                    deps.add(t)
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for start in sorted(graph):
        if state.get(start):
            continue
        path = [start]
        stack = [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_no_import_cycle():
    cycle = find_cycle(import_graph(SRC, PACKAGE))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_import_of_the_package_resolves():
    """Lazy imports run only when their function does.

    One that names a module that does not exist (``from .._dtypes`` one package too shallow after a
    move) is caught here."""
    missing: list[str] = []
    import_graph(SRC, PACKAGE, missing)
    assert not missing, missing


def test_cycle_finder_sees_lazy_and_relative_cycles(tmp_path):
    """The checker itself.

    A cycle through a lazy relative import and a ``from . import m`` is found; the same package
    without it is clean."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .a import A\n")
    (pkg / "sub" / "a.py").write_text("from .. import b\nA = 1\n")
    (pkg / "b.py").write_text("def f():\n    from .sub.a import A\n    return A\n")
    cycle = find_cycle(import_graph(tmp_path, "pkg"))
    assert cycle is not None and set(cycle) == {"pkg.sub.a", "pkg.b"}
    (pkg / "b.py").write_text("def f():\n    from .gone import A\n    return A\n")
    missing: list[str] = []
    assert find_cycle(import_graph(tmp_path, "pkg", missing)) is None
    assert missing == ["pkg.b:2 imports pkg.gone"]


def test_every_module_has_a_layer():
    """A module outside the table is one nobody placed: name it (or its package) in LAYERS."""
    graph = import_graph(SRC, PACKAGE)
    assert not sorted(m for m in graph if layer_of(m) is None)


def test_imports_follow_the_layer_table():
    """Every import of the package's modules follows the layer table.

    Lazy ones included: each goes to its own layer or one MAY_IMPORT lists for it."""
    graph = import_graph(SRC, PACKAGE)
    bad = sorted(f"{mod} ({layer_of(mod)}) imports {dep} ({layer_of(dep)})"
                 for mod, deps in graph.items() for dep in deps
                 if layer_of(dep) not in MAY_IMPORT[layer_of(mod)] | {layer_of(mod)}
                 and (mod, dep) not in DEPRECATED_FORWARDS)
    assert not bad, "imports against the layer table:\n" + "\n".join(bad)


def test_the_layer_table_points_one_way():
    """The table itself.

    No two layers may import each other, even through others; _service stands below the server and
    the router and imports neither them nor the routing; the server never meets the routing library
    or the router process, either way."""
    assert set(MAY_IMPORT) == set(LAYERS)
    order = {layer: set(allowed) for layer, allowed in MAY_IMPORT.items()}
    changed = True
    while changed:  # each layer's set: everything it reaches
        changed = False
        for reach in order.values():
            more = set().union(*(order[r] for r in reach)) - reach
            if more:
                reach |= more
                changed = True
    assert not [layer for layer, reach in order.items() if layer in reach]
    assert "_service" in MAY_IMPORT["server"] and "_service" in MAY_IMPORT["router"]
    assert not order["_service"] & {"server", "routing", "router", "client"}
    for a, b in (("server", "routing"), ("server", "router")):
        assert b not in order[a] and a not in order[b]


def test_routing_library_stands_without_the_server():
    """The routing library imports nothing of the server or of the router process.

    ``import smg_fast.routing`` (the clients a gateway embeds) reaches no module of the server
    package nor of the router process: what it shares with them is in _service."""
    graph = import_graph(SRC, PACKAGE)
    seen: set[str] = set()
    todo = ["smg_fast.routing", "smg_fast"]  # (importing a module imports its parents)
    while todo:
        mod = todo.pop()
        if mod not in seen:
            seen.add(mod)
            todo += graph.get(mod, ())
    assert "smg_fast.routing.dispatch" in seen
    assert not sorted(m for m in seen if m.startswith(("smg_fast.server", "smg_fast.router")))


def test_no_file_grows_past_the_limit():
    """Files are about one thing (DESIGN.md).

    None of the project's sources or tests passes MAX_LINES; generated stubs are exempt."""
    root = SRC.parent
    files = [p for d in ("src", "tests", "bench", "csrc") for p in (root / d).rglob("*")
             if p.suffix in (".py", ".cpp", ".hpp") and "_proto" not in p.parts]
    long = {str(p.relative_to(root)): n for p in files
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert files and not long, f"over {MAX_LINES} lines: {long}"


_IMPORT_OLD_PATHS = """
import importlib, json, sys, warnings
out = {}
for old, new in json.loads(sys.argv[1]).items():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        mod = importlib.import_module(old)
    out[old] = {"same": mod is importlib.import_module(new),
                "warnings": [[w.category.__name__, str(w.message), w.filename] for w in seen]}
print(json.dumps(out))
"""


def test_old_paths_warn_and_are_the_new_modules(tmp_path):
    """Each old path is the very same module as its new home, and warns once on first import.

    The DeprecationWarning names the new home and the release that removes it, and is attributed to
    the importing file (so that warning filters keyed on the user's module apply)."""
    import smg_fast
    from smg_fast._deprecated import OLD_PATHS, REMOVED_IN

    assert OLD_PATHS == COMPAT
    user = tmp_path / "user_code.py"
    user.write_text(_IMPORT_OLD_PATHS)
    here = str(Path(smg_fast.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, str(user), json.dumps(COMPAT)], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert sorted(result) == sorted(COMPAT)
    for old, got in result.items():
        assert got["same"], old
        mine = [w for w in got["warnings"] if f"{old} is deprecated" in w[1]]
        assert len(mine) == 1, (old, got["warnings"])
        category, message, filename = mine[0]
        assert category == "DeprecationWarning"
        assert COMPAT[old] in message and f"removed in smg-fast {REMOVED_IN}" in message
        assert filename == str(user), (old, filename)
    # the first rdma submodule also warns for the old package it goes through, once
    package = [w for got in result.values() for w in got["warnings"]
               if "smg_fast.rdma is deprecated" in w[1]]
    assert len(package) == 1 and package[0][2] == str(user)


def test_old_wire_names_in_errors_warn_and_forward():
    """smg_fast.errors' former wire names still read, warning, as smg_fast._service.wire's."""
    import smg_fast.errors as errors
    from smg_fast._deprecated import REMOVED_IN
    from smg_fast._service import wire

    for name in errors._MOVED_TO_WIRE:
        with pytest.warns(DeprecationWarning, match=f"removed in smg-fast {REMOVED_IN}"):
            assert getattr(errors, name) is getattr(wire, name)
    with pytest.raises(AttributeError):
        errors.NOT_A_NAME  # noqa: B018
    with pytest.warns(DeprecationWarning):
        from smg_fast.errors import RETRYABLE_KEY
    assert RETRYABLE_KEY == "smg-fast-retryable"


def test_no_module_imports_a_deprecated_path():
    """Only the shims themselves import the old paths."""
    graph = import_graph(SRC, PACKAGE)
    old = (*COMPAT, "smg_fast.rdma")
    bad = {mod: sorted(d for d in deps if d in old) for mod, deps in graph.items()
           if mod not in old}
    bad = {k: v for k, v in bad.items() if v}
    assert not bad, bad


def test_old_rdma_package_reexports_the_same_objects():
    with pytest.warns(DeprecationWarning) if "smg_fast.rdma" not in sys.modules else _nothing():
        old = importlib.import_module("smg_fast.rdma")
    new = importlib.import_module("smg_fast.transport.rdma")
    assert old.__all__ == new.__all__
    for name in new.__all__:
        assert getattr(old, name) is getattr(new, name), name
    from smg_fast.transport.errors import TensorError
    assert issubclass(old.DescriptorError, TensorError)


def test_transport_facade_names_resolve_lazily():
    """``smg_fast.transport`` is the encode worker's facade.

    Every name in ``__all__`` is the object its module defines, and importing the facade loads
    neither the RDMA lane nor NIXL."""
    import smg_fast

    here = str(Path(smg_fast.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    code = ("import sys, smg_fast.transport as t; "
            "print(sorted(m for m in sys.modules if 'rdma' in m or 'nixl' in m))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    import smg_fast.transport as facade
    from smg_fast.transport import errors, rdma, shm_owner, tensors

    homes = {"tensors": tensors, "errors": errors, "shm_owner": shm_owner, "rdma": rdma}
    assert set(facade.__all__) == set(facade._FACADE)
    for name in facade.__all__:
        assert getattr(facade, name) is getattr(homes[facade._FACADE[name]], name), name
    with pytest.raises(AttributeError, match="no_such_name"):
        facade.no_such_name  # noqa: B018


@pytest.mark.parametrize("path", ["smg_fast.rdma.preflight", "smg_fast.transport.rdma.preflight"])
def test_preflight_runs_under_both_paths(path):
    """The server runs the preflight as ``python -m``; the old path prints the same verdict.

    With NIXL installed (looked up without importing it) the lane can start: {"ok": true};
    without it, the verdict names NIXL's absence.
    """
    import smg_fast  # the child imports the package this test runs against (installed or src)
    from smg_fast.transport.rdma.nixl import NIXL_MODULES

    here = str(Path(smg_fast.__file__).resolve().parent.parent)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", path], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if any(importlib.util.find_spec(m.split(".")[0]) for m in NIXL_MODULES):
        assert result == {"ok": True}
    else:
        assert (result["ok"], result["reason"]) == (False, "nixl_unavailable"), result
