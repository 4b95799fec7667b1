"""`colony operator --json-logs`: one JSON object per line with timestamp, level, logger, message and,
for messages about one object, its reference (namespace, name, ...)."""

from __future__ import annotations

import io
import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from kopf._cogs.configs.configuration import OperatorSettings
from kopf._core.actions.loggers import LocalObjectLogger

from colony.logging_setup import configure_logging


@pytest.fixture
def root_logging() -> Iterator[None]:
    """Restore the root logger (handlers, level) and warning capture after the test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)


def _lines(stream: io.StringIO) -> list[dict[str, Any]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_json_logs_are_one_object_per_line_with_level_logger_and_object(root_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(json_logs=True, stream=stream)
    logging.getLogger("colony.controllers.gpr.loop").info("scheduling pass: %d pending", 3)
    body = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "pool", "namespace": "team-a", "uid": "u-1"},
    }
    # kopf hands every handler such a logger; LocalObjectLogger does not post Events.
    LocalObjectLogger(body=body, settings=OperatorSettings()).warning("cluster %s\nunreachable", "a")
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("deprecated\nthing", DeprecationWarning, stacklevel=1)
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        logging.getLogger("colony").exception("pass failed")

    plain, about_object, warning, failure = _lines(stream)
    assert plain["level"] == "INFO" and plain["logger"] == "colony.controllers.gpr.loop"
    assert plain["message"] == "scheduling pass: 3 pending" and plain["timestamp"]
    assert "object" not in plain
    assert about_object["level"] == "WARNING" and about_object["message"] == "cluster a\nunreachable"
    assert about_object["object"]["namespace"] == "team-a" and about_object["object"]["name"] == "pool"
    assert about_object["object"]["kind"] == "Colony"
    assert warning["logger"] == "py.warnings" and "deprecated" in warning["message"]
    assert failure["level"] == "ERROR" and "RuntimeError: boom" in failure["exc_info"]


def test_text_logs_stay_kopfs_format(root_logging: None) -> None:
    stream = io.StringIO()
    configure_logging(json_logs=False, verbose=True, stream=stream)
    logging.getLogger("colony").debug("hello")
    line = stream.getvalue().strip()
    assert line.endswith("hello") and "[DEBUG" in line
    with pytest.raises(json.JSONDecodeError):
        json.loads(line)
