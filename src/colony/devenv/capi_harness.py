"""Plays the Cluster API controllers (which need Docker or a cloud) for real objects.

For every Cluster API `Cluster` of a colony in the management cluster it does what CAPI and its
providers would: adds the Cluster finalizer, marks the Cluster Provisioned (or Failed, or keeps it
Provisioning, when a test asks), writes the `<cluster>-kubeconfig` Secret pointing at a real local
API server with kwok GPU nodes, marks MachineDeployments' replicas ready, and on deletion removes
the kubeconfig Secret and the finalizer. It also plays CAAPH: a deployed HelmReleaseProxy for each
provisioned Cluster a colony's HelmChartProxy selects. Used by the integration tests and `make dev`.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

import kubernetes
from kubernetes.client.rest import ApiException

from colony.labels import COLONY_LABEL
from colony.render.labels import kubeconfig_secret_name
from colony.timefmt import now_rfc3339

log = logging.getLogger(__name__)

GROUP, VERSION = "cluster.x-k8s.io", "v1beta2"
ADDONS, ADDONS_VERSION = "addons.cluster.x-k8s.io", "v1alpha1"
CAPI_FINALIZER = "cluster.cluster.x-k8s.io"
POLL_S = 0.3


def _now() -> str:
    return now_rfc3339()


def _condition(type_: str, ok: bool, reason: str, message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": _now(),
    }


class CapiHarness:
    """A background thread standing in for Cluster API against one management cluster.

    `kubeconfig_for(namespace, cluster_name)` returns the kubeconfig text the Secret gets (the
    workload cluster the Cluster "is"). Tests steer outcomes with fail(), hold() and release().
    """

    def __init__(self, management_kubeconfig: str, kubeconfig_for: Callable[[str, str], str]) -> None:
        api = kubernetes.config.new_client_from_config(config_file=management_kubeconfig)
        self.custom = kubernetes.client.CustomObjectsApi(api)
        self.core = kubernetes.client.CoreV1Api(api)
        self.kubeconfig_for = kubeconfig_for
        self._failed: dict[tuple[str, str], str] = {}
        self._held: dict[tuple[str, str], str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="capi-harness", daemon=True)
        self._lock = threading.Lock()

    # -- steering ---------------------------------------------------------------------------

    def fail(self, namespace: str, cluster: str, message: str) -> None:
        """Make Cluster API report this Cluster Failed with `message`."""
        with self._lock:
            self._failed[(namespace, cluster)] = message

    def hold(self, namespace: str, cluster: str, phase: str = "Provisioning") -> None:
        """Keep this Cluster in `phase` (Pending: status untouched, as before CAPI looks at it;
        Provisioning) and, once deleted, Deleting, until release()."""
        with self._lock:
            self._held[(namespace, cluster)] = phase

    def release(self, namespace: str, cluster: str) -> None:
        """Let a held or failed Cluster provision normally."""
        with self._lock:
            self._held.pop((namespace, cluster), None)
            self._failed.pop((namespace, cluster), None)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> CapiHarness:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def __enter__(self) -> CapiHarness:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.sync_once()
            except Exception:  # keep playing CAPI whatever one round hit
                log.exception("capi harness round failed")

    # -- one round ----------------------------------------------------------------------------

    def sync_once(self) -> None:
        """Bring every colony Cluster and MachineDeployment one step towards what CAPI would do."""
        selector = COLONY_LABEL
        clusters = self.custom.list_cluster_custom_object(GROUP, VERSION, "clusters", label_selector=selector)
        for cluster in clusters["items"]:
            self._sync_cluster(cluster)
        deployments = self.custom.list_cluster_custom_object(
            GROUP, VERSION, "machinedeployments", label_selector=selector
        )
        for deployment in deployments["items"]:
            self._sync_machine_deployment(deployment)
        proxies = self.custom.list_cluster_custom_object(
            ADDONS, ADDONS_VERSION, "helmchartproxies", label_selector=selector
        )
        for proxy in proxies["items"]:
            self._sync_helm_chart_proxy(proxy, clusters["items"])

    def _sync_cluster(self, cluster: dict[str, Any]) -> None:
        meta = cluster["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        with self._lock:
            failure = self._failed.get((namespace, name))
            held = self._held.get((namespace, name))
        if meta.get("deletionTimestamp"):
            if held:
                return  # a held Cluster also takes its time to be deleted
            with contextlib.suppress(ApiException):
                self.core.delete_namespaced_secret(kubeconfig_secret_name(name), namespace)
            if CAPI_FINALIZER in meta.get("finalizers", []):
                remaining = [f for f in meta["finalizers"] if f != CAPI_FINALIZER]
                self._patch(
                    namespace,
                    name,
                    {"metadata": {"finalizers": remaining, "resourceVersion": meta["resourceVersion"]}},
                )
            return
        if held == "Pending":
            return
        if CAPI_FINALIZER not in meta.get("finalizers", []):
            self._patch(
                namespace, name, {"metadata": {"finalizers": [*meta.get("finalizers", []), CAPI_FINALIZER]}}
            )
        status = cluster.get("status") or {}
        wanted: dict[str, Any]
        if failure is not None:
            wanted = {
                "phase": "Failed",
                "conditions": [_condition("Available", False, "InfrastructureFailed", failure)],
            }
        elif held is not None:
            wanted = {"phase": "Provisioning", "conditions": [_condition("Available", False, "Provisioning")]}
        else:
            self._ensure_kubeconfig(namespace, name, meta["uid"])
            wanted = {
                "phase": "Provisioned",
                "initialization": {"infrastructureProvisioned": True, "controlPlaneInitialized": True},
                "conditions": [_condition("Available", True, "Available")],
            }
        if status.get("phase") != wanted["phase"]:
            self.custom.patch_namespaced_custom_object_status(
                GROUP, VERSION, namespace, "clusters", name, {"status": wanted}
            )
        if wanted["phase"] != "Provisioned" or (cluster.get("spec") or {}).get("controlPlaneEndpoint"):
            return
        self._patch(namespace, name, {"spec": {"controlPlaneEndpoint": {"host": "127.0.0.1", "port": 6443}}})

    def _patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        with contextlib.suppress(ApiException):  # a conflict is retried next round
            self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "clusters", name, body)

    def _ensure_kubeconfig(self, namespace: str, cluster: str, uid: str) -> None:
        secret_name = kubeconfig_secret_name(cluster)
        with contextlib.suppress(ApiException):
            self.core.read_namespaced_secret(secret_name, namespace)
            return
        body = {
            "metadata": {
                "name": secret_name,
                "namespace": namespace,
                "labels": {"cluster.x-k8s.io/cluster-name": cluster},
                "ownerReferences": [
                    {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Cluster", "name": cluster, "uid": uid}
                ],
            },
            "type": "cluster.x-k8s.io/secret",
            "data": {"value": base64.b64encode(self.kubeconfig_for(namespace, cluster).encode()).decode()},
        }
        with contextlib.suppress(ApiException):  # already created by a concurrent round
            self.core.create_namespaced_secret(namespace, body)

    def _sync_helm_chart_proxy(self, proxy: dict[str, Any], clusters: list[dict[str, Any]]) -> None:
        """Play CAAPH: one deployed HelmReleaseProxy per provisioned Cluster the proxy selects."""
        meta = proxy["metadata"]
        if meta.get("deletionTimestamp"):
            return
        namespace = meta["namespace"]
        selector = ((proxy.get("spec") or {}).get("clusterSelector") or {}).get("matchLabels") or {}
        for cluster in clusters:
            cluster_meta = cluster["metadata"]
            labels = cluster_meta.get("labels") or {}
            if (
                cluster_meta["namespace"] != namespace
                or cluster_meta.get("deletionTimestamp")
                or (cluster.get("status") or {}).get("phase") != "Provisioned"
                or any(labels.get(k) != v for k, v in selector.items())
            ):
                continue
            self._ensure_release(proxy, cluster_meta["name"])

    def _ensure_release(self, proxy: dict[str, Any], cluster: str) -> None:
        meta, spec = proxy["metadata"], proxy.get("spec") or {}
        namespace = meta["namespace"]
        release = f"{meta['name']}-{cluster}"[:63].rstrip("-")
        with contextlib.suppress(ApiException):
            self.custom.get_namespaced_custom_object(
                ADDONS, ADDONS_VERSION, namespace, "helmreleaseproxies", release
            )
            return
        body = {
            "apiVersion": f"{ADDONS}/{ADDONS_VERSION}",
            "kind": "HelmReleaseProxy",
            "metadata": {
                "name": release,
                "labels": {
                    "addons.cluster.x-k8s.io/helmchartproxy-name": meta["name"],
                    "cluster.x-k8s.io/cluster-name": cluster,
                },
                "ownerReferences": [
                    {
                        "apiVersion": f"{ADDONS}/{ADDONS_VERSION}",
                        "kind": "HelmChartProxy",
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {
                "clusterRef": {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Cluster", "name": cluster},
                "repoURL": spec.get("repoURL", ""),
                "chartName": spec.get("chartName", ""),
                "version": spec.get("version", ""),
            },
        }
        with contextlib.suppress(ApiException):
            self.custom.create_namespaced_custom_object(
                ADDONS, ADDONS_VERSION, namespace, "helmreleaseproxies", body
            )
            self.custom.patch_namespaced_custom_object_status(
                ADDONS,
                ADDONS_VERSION,
                namespace,
                "helmreleaseproxies",
                release,
                {
                    "status": {
                        "status": "deployed",
                        "revision": 1,
                        "conditions": [_condition("Ready", True, "Deployed")],
                    }
                },
            )

    def _sync_machine_deployment(self, deployment: dict[str, Any]) -> None:
        meta = deployment["metadata"]
        replicas = (deployment.get("spec") or {}).get("replicas", 1)
        status = deployment.get("status") or {}
        if meta.get("deletionTimestamp") or (status.get("replicas"), status.get("readyReplicas")) == (
            replicas,
            replicas,
        ):
            return
        with contextlib.suppress(ApiException):
            self.custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                meta["namespace"],
                "machinedeployments",
                meta["name"],
                {
                    "status": {
                        "replicas": replicas,
                        "readyReplicas": replicas,
                        "availableReplicas": replicas,
                        "phase": "Running",
                    }
                },
            )
