"""Keep secret values out of the operator's log lines and of the Events kopf posts from them.

`RedactingFilter` is installed on every log handler of the operator and on kopf's per-object
logger (whose records also become Events). It applies `redact` to each record's message and
traceback:

- messages that dump a whole object keep their head only: kopf's debug lines
  "<Cause> is in progress: <body>" and "<Cause> diff: <diff>", and kubernetes_asyncio's
  "response body: <bytes>" (a Secret read is such a body). Object bodies are never logged;
- the value of a `wandbApiKey` field (Python repr, JSON, YAML, or the model's `wandb_api_key=`)
  is replaced, wherever such a field is printed;
- values the operator was handed in plain text (`remember`: a DDPJob's plain `wandbApiKey`), and
  their base64 forms, are replaced anywhere in a message or traceback.

Pure string work on the record; it never drops a record.
"""

from __future__ import annotations

import base64
import logging
import re
import threading
from collections import OrderedDict

REDACTED = "<redacted>"
OMITTED = "<object omitted: colony-operator never logs object bodies>"
MAX_REMEMBERED = 4096
"""Plain values remembered for redaction (the oldest are forgotten first)."""
MIN_REMEMBERED_LENGTH = 4
"""Shorter values are not remembered: replacing every "ab" in every line would garble the logs."""

_BODY_DUMP = re.compile(r"^(?P<head>[A-Z][\w -]*? (?:is in progress|diff)|response body): ", re.DOTALL)
_QUOTED = r"""(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|\\"(?:[^"\\]|\\[^"])*\\")"""
_BARE = r"""(?!(?:None|null)\b)[^\s,;}\]'"\\][^\s,;}\]]*"""
_FIELD_VALUE = re.compile(
    r"""(?P<key>(?:['"]|\\")?\bwandbApiKey(?:['"]|\\")?\s*:\s*|\bwandb_api_key\s*=\s*)"""
    + f"(?:{_QUOTED}|{_BARE})"
)

_remembered: OrderedDict[str, None] = OrderedDict()
_lock = threading.Lock()


def remember(value: str) -> None:
    """Redact `value` (and its base64 form) from every later log line."""
    if len(value) < MIN_REMEMBERED_LENGTH:
        return
    encoded = base64.b64encode(value.encode()).decode()
    with _lock:
        for form in (value, encoded):
            _remembered[form] = None
            _remembered.move_to_end(form)
        while len(_remembered) > MAX_REMEMBERED:
            _remembered.popitem(last=False)


def forget_all() -> None:
    """Forget every remembered value (tests)."""
    with _lock:
        _remembered.clear()


def redact(text: str) -> str:
    """`text` without object bodies, `wandbApiKey` values and remembered values."""
    dump = _BODY_DUMP.match(text)
    if dump is not None:
        return f"{dump.group('head')}: {OMITTED}"
    text = _FIELD_VALUE.sub(lambda m: f"{m.group('key')}'{REDACTED}'", text)
    with _lock:
        known = sorted(_remembered, key=len, reverse=True)  # a longer value first: it may contain another
    for value in known:
        if value in text:
            text = text.replace(value, REDACTED)
    return text


_TRACEBACKS = logging.Formatter()


class RedactingFilter(logging.Filter):
    """Applies `redact` to a record's message and traceback, in place; keeps every record."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Redact `record` (its formatted message replaces msg/args when anything changed)."""
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed call: logging reports it when formatting
            return True
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, ()
        if record.exc_info and record.exc_info[0] is not None:
            record.exc_text = redact(_TRACEBACKS.formatException(record.exc_info))
            record.exc_info = None  # formatters print exc_text; re-formatting would bring the value back
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install(handlers: list[logging.Handler], loggers: tuple[str, ...] = ("kopf.objects",)) -> None:
    """Add one RedactingFilter to each of `handlers` and `loggers` (idempotent)."""
    targets: list[logging.Handler | logging.Logger] = [*handlers, *(logging.getLogger(n) for n in loggers)]
    for target in targets:
        if not any(isinstance(f, RedactingFilter) for f in target.filters):
            target.addFilter(RedactingFilter())
