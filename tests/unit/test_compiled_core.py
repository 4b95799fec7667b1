"""The compiled-core test run (`make test` runs the scheduler tests again with the mypyc build of
hack/build-compiled.sh first on PYTHONPATH) really imports the compiled modules."""

import os

import pytest

import colony.scheduling.queueing.capacity as capacity
import colony.scheduling.queueing.core as core
import colony.scheduling.queueing.quota as quota


@pytest.mark.skipif(os.environ.get("COLONY_EXPECT_COMPILED") != "1", reason="pure-Python run")
def test_scheduler_core_is_the_compiled_build() -> None:
    for module in (core, capacity, quota):
        assert not str(module.__file__).endswith(".py"), f"{module.__name__} is not compiled"
