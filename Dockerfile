# smg-fast encode server (the same image runs the router: see deploy/).
#
#   docker build -t smg-fast .
#   docker run --rm -p 50051:50051 --shm-size=4g smg-fast --pixel-cache-mb 2048 --transport auto
#
# /dev/shm: Docker gives a container 64 MiB, too little for the shm transport (one 1080p float32
# image is ~25 MiB): pass --shm-size (a few GiB; the server counts unread segments against
# --shm-max-outstanding-mb, by default half of min(/dev/shm, RAM)). Kubernetes: an in-memory
# emptyDir at /dev/shm (deploy/encode-server.yaml). Consumers that map shm segments must share
# this /dev/shm (same pod, or host IPC); across hosts use --transport inline or rdma.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: the wheel, with the native core (libjpeg 6.2 headers for the JPEG decoder) ----
FROM ${PYTHON_IMAGE} AS build
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ libjpeg62-turbo-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /wheels .

# ---- runtime: the wheel with the server extra, a non-root user ----
FROM ${PYTHON_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libstdc++6 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin smgfast
COPY --from=build /wheels /wheels
# hadolint ignore=DL3013
RUN wheel="$(ls /wheels/smg_fast-*.whl)" \
    && pip install --no-cache-dir "${wheel}[server]" \
    && rm -rf /wheels
ENV SMG_FAST_HOST=0.0.0.0 \
    SMG_FAST_PORT=50051 \
    PYTHONUNBUFFERED=1
USER 10001:10001
EXPOSE 50051 9464
# gRPC health (NOT_SERVING while warming up or draining); the router's image passes --port 50050
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "smg_fast._service.health_probe"]
ENTRYPOINT ["python", "-m", "smg_fast.server"]
