# colony-operator image: `colony operator` as a non-root user, no build tools in the final stage.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# a C compiler for mypyc, which compiles the scheduler core (setup.py); only in this stage
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY src ./src
RUN COLONY_COMPILE=1 pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
RUN useradd --uid 65532 --no-create-home --shell /usr/sbin/nologin colony
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENTRYPOINT ["colony", "operator"]
CMD ["--json-logs", "--liveness=http://0.0.0.0:8080/healthz"]
