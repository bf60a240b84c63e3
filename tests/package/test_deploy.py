"""The container and Kubernetes files agree with the code.

Every argument the manifests under deploy/ give a container is parsed by that process's own flags
(the parser ``--help`` prints), its probes ask the port it listens on, the grace period outlasts
its drain, /dev/shm is in memory, it runs as the image's user; the Dockerfile's entrypoint and
health check are modules that exist and its health check answers SERVING / not against a real
server. (.ci/deploy.sh validates the same files against the Kubernetes schemas and hadolint.)"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instruction(name: str) -> str:
    """The (last) Dockerfile instruction's text after its keyword, continuation lines joined."""
    text = DOCKERFILE.replace("\\\n", " ")
    found = re.findall(rf"^{name}\s+(.*)$", text, flags=re.M)
    assert found, name
    return found[-1]


def _exec_form(text: str) -> list[str]:
    """A JSON exec form (["python", "-m", ...]) after any --options."""
    return json.loads(text[text.index("["):])


def _containers():
    for path in sorted((ROOT / "deploy").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc["kind"] == "Deployment":
                pod = doc["spec"]["template"]["spec"]
                for c in pod["containers"]:
                    yield path.name, pod, c


CONTAINERS = list(_containers())


def _module(container) -> str:
    """The module the container runs: its command's, else the image's entrypoint's."""
    argv = container.get("command") or _exec_form(_instruction("ENTRYPOINT"))
    assert argv[:2] == ["python", "-m"], argv
    return argv[2]


def _flags(module: str):
    """(build_parser, config_from_args) of smg_fast.server or smg_fast.router."""
    flags = importlib.import_module(f"{module}.flags")
    return flags.build_parser, flags.config_from_args


def test_there_are_manifests_for_both_processes():
    assert {_module(c) for _, _, c in CONTAINERS} == {"smg_fast.server", "smg_fast.router"}


@pytest.mark.parametrize("where, pod, container", CONTAINERS,
                         ids=[f"{f}:{c['name']}" for f, _, c in CONTAINERS])
def test_manifest_args_are_the_process_flags(where, pod, container):
    """Each --flag is in --help, and the whole command line parses and validates."""
    module = _module(container)
    build_parser, config_from_args = _flags(module)
    help_text = build_parser(environ={}).format_help()
    args = container["args"]
    for arg in args:
        assert arg.startswith("--"), (where, arg)
        flag = arg.split("=", 1)[0]
        assert re.search(rf"(^|\s){re.escape(flag)}[\s,]", help_text), (where, flag, module)
    cfg = config_from_args(args, environ={})
    # the probes ask the port the process listens on; the ports named are the ones it uses
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["grpc"] == cfg.port and ports["metrics"] == cfg.metrics_port, where
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["grpc"]["port"] == cfg.port, (where, probe)
    # SIGTERM: the drain (plus the few seconds a stop may take) ends before the SIGKILL
    assert pod["terminationGracePeriodSeconds"] >= cfg.drain_timeout_s + 5, where
    # the image's user, never root, no way up
    user = _instruction("USER").split(":")[0]
    assert str(pod["securityContext"]["runAsUser"]) == user and user != "0", where
    assert pod["securityContext"]["runAsNonRoot"] is True
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    if module == "smg_fast.server":  # the shm transport's /dev/shm: in memory, sized
        mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        shm = volumes[mounts["/dev/shm"]]["emptyDir"]
        assert shm["medium"] == "Memory" and shm["sizeLimit"], where
        assert "startupProbe" in container


def test_router_follows_the_encode_servers_headless_service():
    services = {d["metadata"]["name"]: d for d in yaml.safe_load_all(
        (ROOT / "deploy" / "encode-server.yaml").read_text()) if d["kind"] == "Service"}
    (router,) = [c for _, _, c in CONTAINERS if _module(c) == "smg_fast.router"]
    cfg = _flags("smg_fast.router")[1](router["args"], environ={})
    (worker,) = cfg.workers
    name, port = re.fullmatch(r"dns:///([^:]+):(\d+)", worker).groups()
    assert services[name]["spec"]["clusterIP"] == "None"
    assert int(port) in [p["port"] for p in services[name]["spec"]["ports"]]


def test_dockerfile_runs_the_server_and_checks_its_health():
    assert _exec_form(_instruction("ENTRYPOINT")) == ["python", "-m", "smg_fast.server"]
    check = _exec_form(_instruction("HEALTHCHECK"))
    assert check[:2] == ["python", "-m"] and importlib.util.find_spec(check[2]) is not None
    assert "AS build" in DOCKERFILE and "COPY --from=build" in DOCKERFILE  # multi-stage
    assert "SMG_FAST_PORT=50051" in DOCKERFILE and "EXPOSE 50051" in DOCKERFILE


def test_health_probe_against_a_real_server(capsys):
    """The image's HEALTHCHECK command: 0 while SERVING, 1 when nothing answers."""
    from smg_fast._service.health_probe import main
    from smg_fast.testing.servers import ServerProcess, free_port

    with ServerProcess(["--workers", "1"]) as srv:
        assert main(["--port", str(srv.port)]) == 0
        assert "SERVING" in capsys.readouterr().err
    assert main(["--port", str(free_port()), "--timeout", "1"]) == 1
    assert "no answer" in capsys.readouterr().err
