# syntax=docker/dockerfile:1
# pitcrew's container image:   docker build -t REGISTRY/pitcrew:0.1.0 .
# (`make image` builds it with buildah, no daemon needed; `make image-test` runs pitcrew's
# checks inside it. scripts/image.sh says how, and how the base is made where no registry
# answers.)
#
# Stage `build` makes the wheel (playbooks/ goes inside it as bot/builtin_playbooks)
# and installs it into a virtualenv with exactly the versions of requirements.lock.
# The lock pins everything the source tree's venv installs (the demo's Ray and kmock,
# the test tools), but it is used here as a constraint, so pip installs only the
# runtime dependencies of the wheel, at those versions: no Ray, no kmock, no pytest;
# the build fails if anything installed is not pinned there. The kubernetes client's
# asyncio copy (kubernetes/aio, 68 MB; pitcrew uses the synchronous client) and the
# packages' own test suites (numpy's, matplotlib's: 25 MB) are left out.
# Stage `runtime` is that virtualenv (without pip) on the same slim base: no compiler,
# no pip cache, no source tree, a non-root user, `pitcrew run` as the entrypoint.
# Pin the base by digest too where your registry policy asks for it:
#   docker build --build-arg PYTHON_IMAGE=python:3.11.14-slim-bookworm@sha256:<digest> .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Only where the package index is reached through a TLS-inspecting proxy: that proxy's
# CA bundle, mounted into the build (scripts/image.sh does this for the machine's own).
ARG PIP_CERT
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY requirements.lock ./
RUN python3 -m venv /opt/tools \
 && /opt/tools/bin/pip install --constraint requirements.lock hatchling
COPY pyproject.toml README.md ./
COPY bot/ bot/
COPY playbooks/ playbooks/
RUN /opt/tools/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /dist . \
 && python3 -m venv --without-pip /opt/pitcrew \
 && PIP="/opt/tools/bin/pip --python /opt/pitcrew/bin/python" \
 && $PIP install --constraint requirements.lock /dist/pitcrew-*.whl \
 && $PIP freeze --exclude pitcrew > /tmp/installed.txt \
 && if grep -vxFf requirements.lock /tmp/installed.txt; then \
      echo "the packages above are not pinned by requirements.lock" >&2; exit 1; \
    fi \
 && rm -rf /opt/pitcrew/lib/python3*/site-packages/kubernetes/aio \
 && find /opt/pitcrew/lib/python3*/site-packages -mindepth 2 -type d -name tests -prune \
      -exec rm -rf {} + \
 && /opt/pitcrew/bin/python -m compileall -q /opt/pitcrew/lib \
 && PITCREW_CACHE_DIR=/tmp/pitcrew-cache /opt/pitcrew/bin/pitcrew playbooks test

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="pitcrew" \
      org.opencontainers.image.description="Slack chat-ops bot and remediation agent for Ray on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
# The same uid/gid as the Helm chart's podSecurityContext (runAsUser/runAsGroup/fsGroup).
RUN groupadd --system --gid 10001 pitcrew \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/pitcrew \
      --no-create-home --shell /usr/sbin/nologin pitcrew \
 && mkdir -p /var/lib/pitcrew /var/cache/pitcrew \
 && chown 10001:10001 /var/lib/pitcrew /var/cache/pitcrew
COPY --from=build /opt/pitcrew /opt/pitcrew
ENV PATH=/opt/pitcrew/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PITCREW_CACHE_DIR=/var/cache/pitcrew
# The store (./pitcrew.db by default) and the cache are the only writable paths;
# the chart mounts volumes there and runs with a read-only root filesystem.
WORKDIR /var/lib/pitcrew
USER 10001:10001
EXPOSE 9464
STOPSIGNAL SIGTERM
ENTRYPOINT ["pitcrew", "run"]
