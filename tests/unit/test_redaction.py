"""No secret in a log line at any verbosity: object bodies omitted, `wandbApiKey` values and
remembered plain values (and their base64) replaced, tracebacks included; kopf's diffbase
annotation leaves the plain key out."""

from __future__ import annotations

import base64
import io
import json
import logging
from collections.abc import Iterator

import kopf
import pytest
from kopf._cogs.configs.configuration import OperatorSettings
from kopf._core.actions.loggers import LocalObjectLogger

from colony import redaction
from colony.controllers.kopf_settings import DIFFBASE_IGNORED_FIELDS
from colony.logging_setup import configure_logging
from colony.redaction import OMITTED, REDACTED, redact, remember
from colony.render.resources import without_plain_wandb_key

KEY = "wb-planted-0123456789abcdef"
KEY64 = base64.b64encode(KEY.encode()).decode()
BODY = {
    "apiVersion": "training.exalsius.ai/v1",
    "kind": "DDPJob",
    "metadata": {"name": "job", "namespace": "team-a", "uid": "u-1"},
    "spec": {"image": "busybox", "wandbApiKey": KEY},
}


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    """Restore the root logger and forget remembered values after each test."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.captureWarnings(False)
        redaction.forget_all()


@pytest.mark.parametrize(
    "message",
    [
        f"Creation is in progress: {BODY!r}",
        f"Resuming is in progress: {json.dumps(BODY)}",
        f"Update diff: (('add', ('spec', 'wandbApiKey'), None, {KEY!r}),)",
        f"response body: {json.dumps(BODY).encode()!r}",
    ],
)
def test_messages_that_dump_an_object_keep_only_their_head(message: str) -> None:
    head = message.split(": ", 1)[0]
    assert redact(message) == f"{head}: {OMITTED}"


@pytest.mark.parametrize(
    "message",
    [
        f"patch {{'spec': {{'wandbApiKey': {KEY!r}}}}}",
        f'patch {{"spec":{{"wandbApiKey":"{KEY}"}}}}',
        f"DDPJobSpec(image='busybox', wandb_api_key={KEY!r}, parallelism=1)",
        # kubectl's last-applied annotation (JSON) inside a repr'd dict: escaped quotes.
        'annotations {"last-applied": "{\\"spec\\":{\\"wandbApiKey\\":\\"' + KEY + '\\"}}"}',
        f'wandbApiKey: "it\'s {KEY}"',
    ],
)
def test_wandb_api_key_values_are_replaced_wherever_the_field_is_printed(message: str) -> None:
    redacted = redact(message)
    assert KEY not in redacted and REDACTED in redacted


def test_remembered_values_and_their_base64_are_replaced_anywhere() -> None:
    assert redact(f"error: {KEY} / {KEY64}") == f"error: {KEY} / {KEY64}"  # nothing known yet
    remember(KEY)
    assert redact(f"error: {KEY} / {KEY64}") == f"error: {REDACTED} / {REDACTED}"
    remember("ab")  # too short to be redacted everywhere
    assert redact("tab") == "tab"


def test_a_message_without_secrets_is_unchanged() -> None:
    message = "phase Scheduling -> Running: 2/2 workers running; Secret job-wandb holds the key"
    assert redact(message) == message


def test_patch_that_moves_the_key_is_logged_without_it() -> None:
    """The handler's patch nulls the plain key; kopf logs it at debug: no value to hide."""
    patch = {"spec": {"wandbApiKey": None, "wandbApiKeySecretRef": {"name": "job-wandb", "key": "value"}}}
    message = f"Merge-patching the resource with: {patch!r}"
    assert redact(message) == message


@pytest.mark.parametrize("json_logs", [False, True])
def test_operator_logging_at_the_highest_verbosity_never_prints_the_key(json_logs: bool) -> None:
    stream = io.StringIO()
    configure_logging(verbose=True, json_logs=json_logs, stream=stream)
    objects = LocalObjectLogger(body=BODY, settings=OperatorSettings())
    objects.debug(f"Creation is in progress: {BODY!r}")  # kopf's own line, before any handler runs
    logging.getLogger("kubernetes_asyncio.client.rest").debug("response body: %s", json.dumps(BODY))
    remember(KEY)
    logging.getLogger("colony.controllers.ddpjob").info("moved %s", KEY)
    try:
        raise RuntimeError(f"apply failed for {KEY64}")
    except RuntimeError:
        objects.exception("Handler failed")
    text = stream.getvalue()
    assert "Creation is in progress" in text and "Handler failed" in text and "RuntimeError" in text
    assert KEY not in text and KEY64 not in text
    assert "response body" not in text  # the client's body logger stays at INFO


def test_kopf_events_from_handler_logs_are_redacted_too() -> None:
    """kopf posts an object logger's warnings as Events: the filter sits on its logger."""
    configure_logging(verbose=True, stream=io.StringIO())
    seen: list[str] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(self.format(record))

    capture = Capture()
    logging.getLogger("kopf.objects").addHandler(capture)
    try:
        remember(KEY)
        LocalObjectLogger(body=BODY, settings=OperatorSettings()).warning("bad key %s", KEY)
    finally:
        logging.getLogger("kopf.objects").removeHandler(capture)
    assert seen == [f"bad key {REDACTED}"]


def test_kopf_diffbase_annotation_leaves_the_plain_key_out() -> None:
    storage = kopf.AnnotationsDiffBaseStorage(
        prefix="colony.exalsius.ai", key="last-handled-configuration", ignored_fields=DIFFBASE_IGNORED_FIELDS
    )
    patch = kopf.Patch()
    body = kopf.Body(BODY)
    storage.store(body=body, patch=patch, essence=storage.build(body=body))
    annotation = patch["metadata"]["annotations"]["colony.exalsius.ai/last-handled-configuration"]
    assert KEY not in annotation and json.loads(annotation)["spec"] == {"image": "busybox"}


def test_kubectl_last_applied_configuration_loses_the_plain_key() -> None:
    applied = json.dumps({"kind": "DDPJob", "spec": {"image": "busybox", "wandbApiKey": KEY}})
    stripped = without_plain_wandb_key(applied)
    assert stripped is not None and KEY not in stripped
    assert json.loads(stripped) == {"kind": "DDPJob", "spec": {"image": "busybox"}}
    assert without_plain_wandb_key(json.dumps({"spec": {"image": "busybox"}})) is None
    for hostile in ("", "not json", "[1, 2]", '{"spec": "x"}'):
        assert without_plain_wandb_key(hostile) is None


def test_yaml_style_values_are_replaced_and_nulls_kept() -> None:
    assert (
        redact(f"spec:\n  wandbApiKey: {KEY}\n  image: x")
        == f"spec:\n  wandbApiKey: '{REDACTED}'\n  image: x"
    )
    assert redact("{'wandbApiKey': None}") == "{'wandbApiKey': None}"
    assert redact('{"wandbApiKey":null}') == '{"wandbApiKey":null}'
