# groupd: a standalone Kafka group coordinator, as a container.
#
#   docker build -t groupd .
#   docker run --rm -p 9092:9092 -p 9464:9464 \
#     -e GROUPD_ADVERTISED_LISTENERS=PLAINTEXT://localhost:9092 groupd
#
# GROUPD_ADVERTISED_LISTENERS is required: groupd listens on 0.0.0.0 inside the container, and
# Metadata and FindCoordinator must tell clients an address they can reach (the compose service
# name, e.g. PLAINTEXT://groupd:9092, or localhost:9092 for clients on the host). Without it
# `groupd serve` stops at start-up with a message saying so. Any setting is a GROUPD_<KEY>
# variable (docs/configuration.md); arguments after the image name go to `groupd serve`
# (e.g. --set topics=orders:6). Data (offsets log, topic catalog) lives in the volume.
# Two stages: the build stage has gcc, which compiles groupd's C extension
# (coordinator/server/_native.c; the image has Python's headers already); the image copies the
# built install and has no compiler.
FROM python:3.11-slim-bookworm AS build

ENV PYTHONDONTWRITEBYTECODE=1
# The compiler of whatever bookworm ships: a build-only tool, pinned by the base image's release.
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /opt/groupd
# Dependencies first, in their own layer: it is rebuilt only when pyproject.toml (or the script)
# changes, never for a change to groupd's source.
COPY pyproject.toml ./
COPY .ci/install-python .ci/
RUN PIP_NO_CACHE_DIR=1 PYTHON=python3.11 VENV=/opt/groupd/.venv .ci/install-python deps
COPY . .
# Extras of pyproject.toml to add, e.g. `--build-arg GROUPD_EXTRAS=cluster` for cluster mode's etcd
# client (examples/cluster/docker-compose.yml); the install script reads the variable.
ARG GROUPD_EXTRAS=""
# The same install as `make serve` / `make test` (one shared script), into /opt/groupd/.venv.
RUN PIP_NO_CACHE_DIR=1 PYTHON=python3.11 VENV=/opt/groupd/.venv .ci/install-python

FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/groupd/.venv/bin:$PATH

RUN groupadd --system --gid 10001 groupd \
 && useradd --system --uid 10001 --gid groupd --no-create-home --home-dir /var/lib/groupd \
      --shell /usr/sbin/nologin groupd \
 && mkdir -p /var/lib/groupd \
 && chown groupd:groupd /var/lib/groupd

WORKDIR /opt/groupd
# the checkout with its venv (an editable install: the venv points at this tree, the .so in it)
COPY --from=build /opt/groupd /opt/groupd

ENV GROUPD_DATA_DIR=/var/lib/groupd \
    GROUPD_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    GROUPD_METRICS_LISTENER=http://0.0.0.0:9464/metrics
VOLUME ["/var/lib/groupd"]
# 9092: the Kafka protocol; 9464: Prometheus metrics (/metrics)
EXPOSE 9092 9464

# the groupd user (numeric, so runtimes can check it is not root)
USER 10001:10001
# Readiness: `groupd health --ready` asks the first of GROUPD_LISTENERS (0.0.0.0 becomes 127.0.0.1)
# and succeeds only once every offsets partition is loaded, so `depends_on: service_healthy` waits
# for the offsets log. While starting, it is checked every second for up to two minutes (a large
# log takes a while to load); afterwards every 10 s.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --start-interval=1s --retries=3 \
  CMD ["groupd", "health", "--ready", "--timeout", "3"]
ENTRYPOINT ["groupd", "serve"]
