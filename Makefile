# colony-operator: `make dev` runs the demo on an embedded local control plane, `make test` runs the tests.
SHELL := bash
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: help venv lock tools torch torch-lock crds lint test test-unit test-compiled image image-test bench bench-quick dev clean

help:
	@echo "make dev    - local management + colony cluster with fake GPU nodes, operator in the foreground"
	@echo "make test   - lint, type-check and run unit + integration tests against a real kube-apiserver"
	@echo "make tools  - build the pinned control-plane binaries and download upstream CRDs (cached)"
	@echo "make torch  - the PyTorch venv for the real DDP run test (cached, about 3 GB download)"
	@echo "make crds   - regenerate crds/*.yaml from the API models"
	@echo "make image  - build the operator image with buildah (no Docker); image-test: run it against a local cluster"
	@echo "make bench  - the benchmark suite at full size (bench-quick: minutes); ratios to baselines and peers"

# requirements.lock pins the whole resolved dependency tree (regenerate with `make lock`): installs
# are reproducible and pip does not spend minutes backtracking through botocore releases.
$(BIN)/colony: pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c requirements.lock -e '.[test]'
	touch $@

lock: venv
	$(BIN)/pip freeze --exclude-editable | grep -v '^colony-operator' > requirements.lock

venv: $(BIN)/colony

tools:
	bash hack/build-control-plane.sh >/dev/null
	bash hack/fetch-crds.sh >/dev/null

torch:
	bash hack/torch-venv.sh >/dev/null

torch-lock: torch
	{ sed -n '1,2p' hack/torch-requirements.lock; "$$(bash hack/torch-venv.sh)/bin/pip" freeze --disable-pip-version-check; } > hack/torch-requirements.lock.new
	mv hack/torch-requirements.lock.new hack/torch-requirements.lock

crds: venv
	$(BIN)/colony crds

lint: venv
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

test-unit: venv
	$(BIN)/pytest -m "not integration" $(PYTEST_ARGS)

# the scheduler core ships compiled by mypyc (setup.py); its tests run once more against that build
COMPILED_CORE_TESTS := tests/unit/test_compiled_core.py tests/unit/test_queueing_core.py \
	tests/unit/test_queueing_properties.py tests/unit/test_queueing_objects.py tests/unit/test_simulate.py

test-compiled: venv
	COLONY_EXPECT_COMPILED=1 PYTHONPATH="$$(bash hack/build-compiled.sh)" $(BIN)/pytest -q $(COMPILED_CORE_TESTS)

# IMAGE_TEST=0 leaves out the image build (buildah and mmdebstrap need root to install; about 6 min
# cold): tests/integration/test_image.py then skips.
IMAGE_TEST ?= 1

test: venv tools torch lint test-compiled $(if $(filter 1,$(IMAGE_TEST)),image)
	COLONY_TEST_IMAGE=localhost/$(IMAGE) $(BIN)/pytest $(PYTEST_ARGS)

# The operator image, built by buildah with --isolation chroot (no Docker daemon; hack/build-image.sh).
# IMAGE names it. The base is the official python image of versions.env where it can be pulled
# (IMAGE_PULL_TIMEOUT, 60 s), else a Debian base made by mmdebstrap, cached outside the repository
# (IMAGE_BASE=auto|official|debian; PYTHON_IMAGE=<image> uses that one).
IMAGE ?= colony-operator:dev

image:
	IMAGE=$(IMAGE) bash hack/build-image.sh

# The built image's `colony operator` (its entrypoint, as UID 65532, chroot isolation, host network)
# against the local management cluster: an existing-cluster Colony turns Ready, a DDPJob's pods appear.
image-test: venv tools image
	COLONY_TEST_IMAGE=localhost/$(IMAGE) $(BIN)/pytest tests/integration/test_image.py $(PYTEST_ARGS)

# Benchmarks against baselines and peers measured in the same run (bench/README.md); results in
# bench/results/<date>.json. Peers (training-operator, Kueue) are built from Go modules, cached.
bench: venv tools
	$(BIN)/python -m bench --size full

bench-quick: venv tools
	$(BIN)/python -m bench --size quick

dev: venv tools
	$(BIN)/colony dev

clean:
	rm -rf $(VENV) .dev .pytest_cache .mypy_cache .ruff_cache
