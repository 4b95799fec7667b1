# colony-operator image: `colony operator` as a non-root user, no build tools in the final stage.
#
#   docker build -t colony-operator:dev .          # on the official Python image (the default)
#   make image                                     # buildah, no Docker; the same base, or one made
#                                                  # by hack/image-base.sh when it cannot be pulled
#
# Both stages must use the same PYTHON_IMAGE: the virtual environment built in the first one links
# to that image's python3.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# helm for add-ons on existing clusters (colony.kube.helm), built from the Go module proxy at the
# version pinned in src/colony/versions.env. `make image` builds it outside the image (the same
# binary the tests use) and replaces this stage with `--build-context helm=<dir>`.
ARG GOLANG_IMAGE=golang:1.26.8-bookworm

FROM ${GOLANG_IMAGE} AS helm
ARG HELM_VERSION=v3.21.4
ARG HELM_K8S_MINOR=36
RUN CGO_ENABLED=0 GOBIN=/out go install -trimpath -ldflags "-s -w \
      -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION} \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=${HELM_K8S_MINOR} \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=${HELM_K8S_MINOR}" \
      "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" \
    && mv /out/helm /helm

FROM ${PYTHON_IMAGE} AS build
# A C compiler for mypyc, which compiles the scheduler core (setup.py); only in this stage. A Debian
# python3 base also needs python3-dev (headers) and python3-venv (pip): `make image` adds them here.
ARG BUILD_PACKAGES="gcc libc6-dev"
# Set by `make image` when the host reaches PyPI through a TLS-intercepting proxy: the host's CA
# bundle is mounted for the RUN steps only (never copied into the image).
ARG PIP_CERT
RUN apt-get update && apt-get install -y --no-install-recommends ${BUILD_PACKAGES} \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md requirements.lock ./
COPY src ./src
# Wheels of the package (scheduler core compiled) and of every dependency at the versions of
# requirements.lock, then a virtual environment without pip that gets only those wheels.
RUN python3 -m venv /opt/pip \
    && COLONY_COMPILE=1 /opt/pip/bin/pip wheel --no-cache-dir --disable-pip-version-check \
         -c requirements.lock --wheel-dir /wheels . \
    && python3 -m venv --without-pip /opt/colony \
    && /opt/pip/bin/pip --python /opt/colony/bin/python install --no-cache-dir --disable-pip-version-check \
         --no-index --find-links /wheels colony-operator \
    && /opt/colony/bin/python -c "import colony.scheduling.queueing.core as c; assert c.__file__.endswith('.so'), c.__file__"

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="colony-operator" \
      org.opencontainers.image.source="https://github.com/colony-operator/colony-operator" \
      org.opencontainers.image.licenses="Apache-2.0"
# No useradd: a Debian minbase has no passwd package. UID/GID 65532 as the chart's securityContext.
RUN echo 'colony:x:65532:65532:colony-operator:/nonexistent:/usr/sbin/nologin' >> /etc/passwd \
    && echo 'colony:x:65532:' >> /etc/group
COPY --from=build /opt/colony /opt/colony
COPY --from=helm /helm /usr/local/bin/helm
# helm keeps its cache and config under /tmp (the chart's only writable path: readOnlyRootFilesystem).
ENV PATH=/opt/colony/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    HELM_CACHE_HOME=/tmp/helm/cache \
    HELM_CONFIG_HOME=/tmp/helm/config \
    HELM_DATA_HOME=/tmp/helm/data
USER 65532:65532
ENTRYPOINT ["colony", "operator"]
CMD ["--json-logs", "--liveness=http://0.0.0.0:8080/healthz"]
