"""Operator logging: kopf's text format, or one JSON object per line (`--json-logs`).

A JSON line carries `timestamp`, `level`, `logger`, `message` and, for messages about one object
(kopf's per-object loggers: every handler's `logger`), `object` with its apiVersion, kind,
namespace, name and uid; exceptions come as an `exc_info` string inside the same line.

At every verbosity, no line carries a secret: `colony.redaction` filters every handler and kopf's
per-object logger (whose warnings become Events), and the API clients' debug loggers, which print
whole response bodies (Secrets included), stay at INFO even with `--verbose`.
"""

from __future__ import annotations

import logging
from typing import Any

import kopf
from kopf._core.actions.loggers import ObjectJsonFormatter

from colony import redaction

JSON_FIELDS = "%(levelname)s %(name)s %(message)s"
RENAMED = {"levelname": "level", "name": "logger"}
OBJECT_KEY = "object"
BODY_LOGGERS = ("kubernetes_asyncio.client.rest", "kubernetes.client.rest")
"""Loggers that print whole response bodies at DEBUG: never below INFO."""


def json_formatter() -> logging.Formatter:
    """kopf's JSON formatter (object references under `object`) with level and logger names."""
    formatter: logging.Formatter = ObjectJsonFormatter(
        JSON_FIELDS, rename_fields=RENAMED, refkey=OBJECT_KEY, timestamp=True
    )
    return formatter


def configure_logging(*, verbose: bool = False, json_logs: bool = False, stream: Any = None) -> None:
    """Configure the root logger as kopf does, with our JSON formatter when `json_logs`; `stream`
    (default stderr) is where the lines go."""
    kopf.configure(
        verbose=verbose,
        log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL,
        log_refkey=OBJECT_KEY if json_logs else None,
    )
    for handler in logging.getLogger().handlers:
        if type(handler).__name__ != "_KopfStreamHandler" or not isinstance(handler, logging.StreamHandler):
            continue
        if stream is not None:
            handler.setStream(stream)
        if json_logs:
            handler.setFormatter(json_formatter())
    redaction.install(logging.getLogger().handlers)
    for name in BODY_LOGGERS:
        logging.getLogger(name).setLevel(logging.INFO)
    # Python warnings become log records too, so a JSON log stays JSON.
    logging.captureWarnings(json_logs)
