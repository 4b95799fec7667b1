"""Bounded user expressions on a real API server, with the operator as a real process.

- A WorkloadDefinition with an endless expression (`def f: f; f`) or one yielding a huge output is
  marked `Accepted=False` naming the field, while the operator keeps placing another kind and its
  liveness endpoint keeps answering quickly (jq holds the GIL: evaluated in the operator's own
  process, such an expression froze every controller and the probe for good).
- The validating webhook (kopf's WebhookServer with a self-signed certificate on 127.0.0.1, called
  by the local kube-apiserver) rejects a definition whose expression does not compile or never ends.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from colony.controllers.webhook import PATH
from colony.devenv.cluster import LocalCluster
from colony.devenv.process import ManagedProcess
from colony.placement.names import COLONY_ANNOTATION, MESSAGE_ANNOTATION
from tests.integration.conftest import eventually
from tests.integration.test_colony_controller import _apply, _kubeconfig_secret, _phase_is

pytestmark = pytest.mark.integration

EXPRESSION_TIMEOUT_S = 3.0
"""The operator's bound in these tests: long enough to see the probe answer while a worker spins."""
LOCAL = "127.0.0.1"
ENABLED = {"placement.exalsius.ai/enabled": "true"}
GADGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                        },
                    }
                },
            }
        ],
    },
}


def _definition(
    name: str,
    kind: str,
    replicas_path: str,
    labels: dict[str, str] | None = None,
    template_path: str = ".spec.template",
) -> dict[str, Any]:
    component = {"name": "main", "podTemplatePath": template_path, "replicasPath": replicas_path}
    return {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "WorkloadDefinition",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "target": {"group": "example.com", "version": "v1", "kind": kind, "plural": f"{kind.lower()}s"},
            "components": [component],
        },
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def webhook_certificates(directory: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 (tls.crt, tls.key); returns the CA's PEM."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "colony-test-webhook-ca")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    (directory / "tls.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (directory / "tls.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return ca.public_bytes(serialization.Encoding.PEM)


class Operator:
    """An operator process of this module: its own namespace, liveness probe and webhook."""

    def __init__(self, management: LocalCluster, directory: Path) -> None:
        self.namespace = f"k-{uuid.uuid4().hex[:8]}"
        management.kubectl("create", "namespace", self.namespace)
        self.ca = webhook_certificates(directory)
        self.liveness = f"http://127.0.0.1:{_free_port()}/healthz"
        self.webhook_port = _free_port()
        self.log = directory / "operator.log"
        env = {
            **os.environ,
            "KUBECONFIG": str(management.kubeconfig_path),
            "COLONY_EXPRESSION_TIMEOUT_SECONDS": str(EXPRESSION_TIMEOUT_S),
        }
        argv = [
            sys.executable,
            "-m",
            "colony",
            "operator",
            "--verbose",
            f"--namespace={self.namespace}",
            f"--liveness={self.liveness}",
            f"--webhook-port={self.webhook_port}",
            f"--webhook-cert-dir={directory}",
            "--webhook-addr=127.0.0.1",
        ]
        self.process = ManagedProcess("operator", argv, self.log, env=env)
        self.process.start()
        try:
            self.process.wait_until(
                lambda: "client is configured" in self.log.read_text().lower(), 60, "a client"
            )
        except BaseException:
            self.process.stop()
            raise


@pytest.fixture(scope="module")
def operator(management: LocalCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    process = Operator(management, tmp_path_factory.mktemp("expression-bounds"))
    try:
        yield process
    finally:
        process.process.stop()


class LivenessWatch:
    """Polls the liveness endpoint every 0.2 s in a thread; records the slowest answer."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.slowest = 0.0
        self.failures: list[str] = []
        self.answers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    assert response.status == 200
                self.answers += 1
            except Exception as error:
                self.failures.append(repr(error))
            self.slowest = max(self.slowest, time.monotonic() - started)
            self._stop.wait(0.2)

    def __enter__(self) -> LivenessWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)


def _condition(management: LocalCluster, name: str) -> dict[str, Any] | None:
    status = management.get_json("workloaddefinition", name).get("status") or {}
    found = [c for c in status.get("conditions") or [] if c.get("type") == "Accepted"]
    return found[0] if found else None


def test_pathological_definitions_are_marked_invalid_and_placement_and_liveness_go_on(
    management: LocalCluster, colony_cluster: LocalCluster, operator: Operator, tmp_path: Path
) -> None:
    namespace = operator.namespace
    suffix = namespace.removeprefix("k-")
    loop, huge, good = f"loop-{suffix}", f"huge-{suffix}", f"gadgets-{suffix}"
    crd = tmp_path / "gadgets.json"
    crd.write_text(json.dumps(GADGET_CRD))
    management.install_crds([crd])
    colony_cluster.install_crds([crd])
    _kubeconfig_secret(management, namespace, "colony-kubeconfig", colony_cluster.kubeconfig())
    colony = {
        "apiVersion": "infra.exalsius.ai/v1",
        "kind": "Colony",
        "metadata": {"name": "here"},
        "spec": {
            "k8sVersion": "v1.36.3",
            "colonyClusters": [
                {
                    "clusterName": "onprem",
                    "existing": {"kubeconfigSecretRef": {"name": "colony-kubeconfig"}},
                    "pricePerHour": 1.0,
                }
            ],
        },
    }
    _apply(management, namespace, colony)
    eventually(lambda: _phase_is(management, namespace, "here", "Ready"), 90)
    try:
        with LivenessWatch(operator.liveness) as watch:
            management.apply(
                [
                    _definition(loop, f"Loop{suffix}", "1", template_path="def f: f; f"),
                    _definition(huge, f"Huge{suffix}", '"x" * 2000000'),
                    # fine on the probe inputs, endless on an object asking for it
                    _definition(good, "Gadget", "if .spec.loop then (def f: f; f) else .spec.replicas end"),
                ]
            )
            looping = eventually(lambda: _condition(management, loop), 90)
            assert looping["status"] == "False" and looping["reason"] == "Invalid", looping
            assert "spec.components[0].podTemplatePath" in looping["message"]
            # WorkloadDefinitions are cluster-scoped: the session operator (default bound) may write
            # this verdict before this module's operator does, so any bound is accepted here.
            assert re.search(r"did not finish within [0-9.]+s", looping["message"]), looping
            huge_output = eventually(lambda: _condition(management, huge), 60)
            assert huge_output["status"] == "False" and "yields more than" in huge_output["message"]
            accepted = eventually(lambda: _condition(management, good), 60)
            assert accepted["status"] == "True", accepted

            # another kind is placed all the same
            gadget = {
                "apiVersion": "example.com/v1",
                "kind": "Gadget",
                "metadata": {"name": "g1", "labels": ENABLED},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
            }
            _apply(management, namespace, gadget)
            evil = {
                **gadget,
                "metadata": {"name": "evil", "labels": ENABLED},
                "spec": {**gadget["spec"], "loop": True},  # its template is there: replicasPath runs
            }
            _apply(management, namespace, evil)

            def placed() -> bool:
                found = management.get_json("gadget", "g1", "-n", namespace)
                return (found["metadata"].get("annotations") or {}).get(
                    COLONY_ANNOTATION
                ) == f"{namespace}/here"

            eventually(placed, 90)
            assert colony_cluster.get_json("gadget", "g1", "-n", namespace)["spec"]["replicas"] == 1

            def unplaceable() -> str:
                found = management.get_json("gadget", "evil", "-n", namespace)
                message: str = (found["metadata"].get("annotations") or {}).get(MESSAGE_ANNOTATION) or ""
                return message

            message = eventually(unplaceable, 60)
            assert f"did not finish within {EXPRESSION_TIMEOUT_S:g}s" in message, message
            assert f"Gadget {namespace}/evil" in message, message
        assert watch.answers >= 5 and not watch.failures, watch.failures
        assert watch.slowest < 2.0, f"liveness answered after {watch.slowest:.1f}s"
        assert operator.process.running
        assert "expression worker" in operator.log.read_text()  # the spinning worker was killed
    finally:
        management.kubectl(
            "delete", "gadgets", "--all", "-n", namespace, "--wait=true", "--timeout=60s", check=False
        )
        management.kubectl(
            "delete", "workloaddefinition", loop, huge, good, "--ignore-not-found", check=False
        )


def test_the_webhook_rejects_unusable_expressions_at_admission(
    management: LocalCluster, operator: Operator
) -> None:
    suffix = operator.namespace.removeprefix("k-")
    label = {"colony-test/webhook": suffix}
    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"colony-test-{suffix}"},
        "webhooks": [
            {
                "name": "workloaddefinitions.infra.exalsius.ai",
                "clientConfig": {
                    "url": f"https://127.0.0.1:{operator.webhook_port}{PATH}",
                    "caBundle": base64.b64encode(operator.ca).decode(),
                },
                # only this test's objects: other tests' definitions never wait for this operator
                "objectSelector": {"matchLabels": label},
                "rules": [
                    {
                        "apiGroups": ["infra.exalsius.ai"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["workloaddefinitions"],
                        "scope": "Cluster",
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 15,
            }
        ],
    }
    management.apply([configuration])
    names = [f"wh-good-{suffix}", f"wh-syntax-{suffix}", f"wh-loop-{suffix}"]
    try:
        good = _definition(names[0], f"Good{suffix}", ".spec.replicas // 1", label)

        def admitted() -> bool:  # the configuration takes a moment to reach the API server's cache
            applied = management.kubectl("apply", "-f", "-", input_text=json.dumps(good), check=False)
            return applied.returncode == 0

        eventually(admitted, 30, 1.0)
        syntax = _definition(names[1], f"Syntax{suffix}", ".spec.replicas // ", label)
        rejected = management.kubectl("apply", "-f", "-", input_text=json.dumps(syntax), check=False)
        assert rejected.returncode != 0
        assert "denied the request" in rejected.stderr, rejected.stderr
        assert "spec.components[0].replicasPath" in rejected.stderr and "does not compile" in rejected.stderr
        endless = _definition(names[2], f"Loop{suffix}", "def f: f; f", label)
        rejected = management.kubectl("apply", "-f", "-", input_text=json.dumps(endless), check=False)
        assert rejected.returncode != 0 and "did not finish within" in rejected.stderr, rejected.stderr
        assert management.kubectl("get", "workloaddefinition", names[1], check=False).returncode != 0
        # an update that breaks an admitted definition is rejected too
        broken = _definition(names[0], f"Good{suffix}", ".[[[", label)
        rejected = management.kubectl("apply", "-f", "-", input_text=json.dumps(broken), check=False)
        assert rejected.returncode != 0 and "does not compile" in rejected.stderr, rejected.stderr
    finally:
        management.kubectl("delete", "validatingwebhookconfiguration", f"colony-test-{suffix}", check=False)
        management.kubectl("delete", "workloaddefinition", *names, "--ignore-not-found", check=False)
