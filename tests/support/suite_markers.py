"""The suite's markers, applied here and nowhere else, and the process starts that prove them.

- ``spawns``: starts smg-fast service processes (server, router, RDMA peer);
- ``oracle``: runs a reference in its own venv (the torchvision oracle, vLLM, SGLang);
- ``nixl``: real NIXL (the module imports rdma_common, which skips it where NIXL is missing);
- ``slow``: any of those, or a test listed in SLOW below. ``pytest -m "not slow"`` is the
  development loop; the README's command runs everything.

A test is marked by the fixtures it uses and by the words its own source uses (a helper or
fixture that starts a process is listed once, below). Every child process the session starts
is counted by kind (subprocess.Popen is instrumented once, at import); a test that started a
process its markers do not declare fails the session, so the markers cannot drift from what
the tests do. The counts close the terminal summary.
"""

from __future__ import annotations

import collections
import inspect
import os
import subprocess
import time
from pathlib import Path

import pytest

MARKERS = ("slow", "spawns", "oracle", "nixl")

# Fixtures that start service processes / run the oracle venv (any scope): their users are
# marked.
SPAWNING_FIXTURES = {"fleet", "fresh_fleet", "peers", "rdma_server", "routed", "mixed",
                     "server_process", "service_processes"}
ORACLE_FIXTURES = {"tv_reference", "oracle", "class_results", "engine_results", "hf_torchvision",
                   "tv_refs", "vllm_python", "sglang_python"}
# Words in a test's own source that start them.
SPAWNING_WORDS = ("ServerProcess(", "RouterProcess(", "start_servers(", "PeerProcess(",
                  '"smg_fast.server"', '"smg_fast.router"', "rdma_peer", "start_routed(",
                  "latency.main(")
ORACLE_WORDS = ("run_oracle(", "tv_python(", "run_with_smg_fast(", "equals_torchvision_oracle(")
# Slow for other reasons (reruns of whole suites, big references): "file::test" prefixes.
ISA_RERUNS = "test_isa_paths.py::test_parity_suites_under_isa_cap"
SLOW = (ISA_RERUNS, "test_consumer_qwen2vl_tower.py", "test_cli.py", "test_proto_stubs.py",
        "test_oracle_cache.py::test_a_whole_suite_run_that_runs_nothing")

SERVICE_KINDS = ("server", "router", "rdma_peer")
STARTS: collections.Counter[str] = collections.Counter()


def _kind(args: object) -> str:
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else [str(args)]
    joined = " ".join(argv)
    for module, kind in (("smg_fast.server", "server"), ("smg_fast.router", "router"),
                         ("smg_fast.testing.rdma_peer", "rdma_peer")):
        if f"-m {module}" in joined:
            return kind
    if argv and _is_oracle_python(argv[0]):
        return "oracle"
    return "python" if argv and Path(argv[0]).name.startswith("python") else "other"


def _is_oracle_python(exe: str) -> bool:
    from smg_fast.testing.oracle_venv import TV_PYTHON_ENV, venv_cache

    if exe == os.environ.get(TV_PYTHON_ENV):
        return True
    try:
        return Path(exe).absolute().is_relative_to(venv_cache().absolute())
    except (OSError, ValueError):
        return False


_popen_init = subprocess.Popen.__init__


def _counting_init(self: subprocess.Popen, args: object, *rest: object, **kw: object) -> None:
    STARTS[_kind(args)] += 1
    _popen_init(self, args, *rest, **kw)


subprocess.Popen.__init__ = _counting_init  # type: ignore[method-assign]


def _source(item: pytest.Item) -> str:
    try:
        return inspect.getsource(item.function)  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        return ""


def _module_source(item: pytest.Item) -> str:
    try:
        return inspect.getsource(item.module)  # type: ignore[attr-defined]
    except (AttributeError, OSError, TypeError):
        return ""


def _where(item: pytest.Item) -> str:
    return f"{item.path.name}::{item.name}"


def markers_for(item: pytest.Item) -> set[str]:
    """What item is, from its fixtures, its source and its module."""
    names = set(getattr(item, "fixturenames", ()))
    src = _source(item)
    out = set()
    if names & SPAWNING_FIXTURES or any(w in src for w in SPAWNING_WORDS):
        out.add("spawns")
    if names & ORACLE_FIXTURES or any(w in src for w in ORACLE_WORDS):
        out.add("oracle")
    if "rdma_common" in _module_source(item):
        out.add("nixl")
    if out or _where(item).startswith(SLOW):
        out.add("slow")
    return out


def pytest_configure(config: pytest.Config) -> None:
    config._smg_unmarked = []  # type: ignore[attr-defined]
    config._smg_started = time.time()  # type: ignore[attr-defined]


# Options with which a run reads fewer entries than the suite does: its tests are chosen, stop
# early or do not run at all (--collect-only, --setup-plan, --setup-only).
NARROWING = ("keyword", "markexpr", "lf", "deselect", "exitfirst", "maxfail", "ignore",
             "ignore_glob", "stepwise", "stepwise_skip", "collectonly", "setupplan", "setuponly")


def whole_suite(config: pytest.Config) -> bool:
    """Whether this run is every test under tests/ (the README's command): nothing left out.

    Not when tests are left out or not run (-k, -m, --lf, --deselect, --ignore, -x, --sw,
    --collect-only, --setup-only / --setup-plan): their entries were not read."""
    tests = Path(__file__).resolve().parents[1]
    narrowed = any(getattr(config.option, name, None) for name in NARROWING)
    return [Path(a.split("::")[0]).resolve() for a in config.args] == [tests] and not narrowed \
        and not getattr(config, "_smg_deselected", 0)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:  # -k, -m, --lf, --deselect or a plugin's choice: not the whole suite
        config = items[0].config
        seen = getattr(config, "_smg_deselected", 0)
        config._smg_deselected = seen + len(items)  # type: ignore[attr-defined]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks every item; the ISA reruns go last.

    After the suites whose oracle outputs they read from the cache (tests/support/oracle_cache.py).
    """
    for item in items:
        for name in sorted(markers_for(item)):
            item.add_marker(name)
    items.sort(key=lambda item: _where(item).startswith(ISA_RERUNS))  # stable: order kept


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    before = STARTS.copy()
    try:
        return (yield)
    finally:
        started = STARTS - before
        have = {m.name for m in item.iter_markers()}
        missing = sorted({"spawns" for k in SERVICE_KINDS if started[k]} - have
                         | ({"oracle"} - have if started["oracle"] else set()))
        if missing:
            item.config._smg_unmarked.append((item.nodeid, missing, dict(started)))


def pytest_terminal_summary(terminalreporter, exitstatus, config: pytest.Config) -> None:
    counts = ", ".join(f"{k} {STARTS[k]}" for k in (*SERVICE_KINDS, "oracle", "python", "other"))
    terminalreporter.write_line(f"child processes started: {counts}")
    from support.oracle_cache import STATS as ORACLE

    if ORACLE:
        terminalreporter.write_line("oracle outputs: " + ", ".join(
            f"{k} {ORACLE[k]}" for k in ("hit", "computed", "uncacheable")))
    for nodeid, missing, started in config._smg_unmarked:
        terminalreporter.write_line(f"UNMARKED: {nodeid} started {started} without "
                                    f"{missing}: list what starts it in tests/support/"
                                    "suite_markers.py",
                                    red=True, bold=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if config._smg_unmarked:  # type: ignore[attr-defined]
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    elif exitstatus == pytest.ExitCode.OK and whole_suite(config):
        from support.oracle_cache import prune

        # every entry the suite reads was touched during it: the rest are for inputs, options
        # or versions no test asks for any more
        entries, size = prune(config._smg_started)  # type: ignore[attr-defined]
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if entries and reporter is not None:
            reporter.write_line(f"oracle cache: {entries} unused entries ({size / 2**30:.1f} "
                                "GiB) deleted")
