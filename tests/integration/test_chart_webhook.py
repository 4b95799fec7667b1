"""The chart's WorkloadDefinition webhook (templates/webhook.yaml): certificate, Service,
configuration and the Deployment's side agree with each other and with the operator's handler."""

from __future__ import annotations

import base64

import pytest
from cryptography import x509

from colony.controllers.webhook import CERT_FILE, KEY_FILE, PATH
from colony.devenv.tools import Tools
from tests.integration.test_chart import _of_kind, render

pytestmark = pytest.mark.integration


def test_webhook_objects_fit_together(tools: Tools) -> None:
    docs = render(tools, "ops", "--set", "webhook.port=9555")
    (secret,) = [d for d in _of_kind(docs, "Secret") if d["metadata"]["name"].endswith("-webhook-tls")]
    (service,) = [d for d in _of_kind(docs, "Service") if d["metadata"]["name"].endswith("-webhook")]
    (configuration,) = _of_kind(docs, "ValidatingWebhookConfiguration")
    (deployment,) = _of_kind(docs, "Deployment")
    (webhook,) = configuration["webhooks"]

    # the serving certificate is signed by the CA the API server is told to trust, for the Service
    ca = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["ca.crt"]))
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"][CERT_FILE]))
    assert KEY_FILE in secret["data"] and secret["type"] == "kubernetes.io/tls"
    cert.verify_directly_issued_by(ca)
    assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == base64.b64decode(secret["data"]["ca.crt"])
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert f"{service['metadata']['name']}.ops.svc" in names.get_values_for_type(x509.DNSName)

    # the API server calls the handler's path through the Service, which reaches the container port
    assert webhook["clientConfig"]["service"] == {
        "name": service["metadata"]["name"],
        "namespace": "ops",
        "path": PATH,
        "port": 443,
    }
    assert webhook["rules"][0]["resources"] == ["workloaddefinitions"]
    assert webhook["failurePolicy"] == "Fail" and webhook["sideEffects"] == "None"
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "webhook"
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert {"name": "webhook", "containerPort": 9555, "protocol": "TCP"} in container["ports"]
    assert "--webhook-port=9555" in container["args"]
    assert "--webhook-cert-dir=/etc/colony/webhook" in container["args"]
    assert {"name": "webhook-tls", "mountPath": "/etc/colony/webhook", "readOnly": True} in container[
        "volumeMounts"
    ]
    assert {"name": "webhook-tls", "secret": {"secretName": secret["metadata"]["name"]}} in pod["volumes"]


def test_webhook_can_be_switched_off(tools: Tools) -> None:
    docs = render(tools, "ops", "--set", "webhook.enabled=false")
    assert not _of_kind(docs, "ValidatingWebhookConfiguration")
    assert not [d for d in docs if "webhook" in d["metadata"]["name"]]
    (deployment,) = _of_kind(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert not [a for a in container["args"] if a.startswith("--webhook")]
