"""One local Kubernetes cluster: etcd + kube-apiserver (+ scheduler, controller-manager, kwok).

Everything listens on 127.0.0.1 on free ports, with TLS and RBAC, and an admin client certificate in
`system:masters`. Several clusters can run side by side (a management cluster and colony clusters).
`kubectl` is always the pinned one from the tool cache.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml

from colony.devenv.kwok import GPUNodeSpec, gpu_node_manifests, kwok_config
from colony.devenv.pki import ClusterPKI, create_pki
from colony.devenv.process import ManagedProcess, ProcessFailed, free_port
from colony.devenv.tools import Tools

START_TIMEOUT_S = 90.0

# Volcano's scheduler with gang scheduling; its config directory holds nothing else (it reloads on
# every write in that directory).
VOLCANO_SCHEDULER_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""


class KubectlError(RuntimeError):
    """kubectl exited non-zero; the message holds its stderr."""

    def __init__(self, args: Sequence[str], returncode: int, stderr: str) -> None:
        super().__init__(f"kubectl {' '.join(args)} failed ({returncode}): {stderr.strip()}")
        self.returncode = returncode
        self.stderr = stderr


class LocalCluster:
    """A real Kubernetes control plane running as local processes.

    Use as a context manager, or call start() and stop() (stop is idempotent and also stops what
    a failed start left running).
    """

    def __init__(
        self,
        name: str,
        tools: Tools,
        *,
        workdir: Path | None = None,
        scheduler: bool = True,
        controller_manager: bool = False,
        kwok: bool = True,
        audit_policy: str | None = None,
    ) -> None:
        """`audit_policy`: an audit Policy (YAML) for the API server; every event it selects is
        written as one JSON line to `audit_log_path`."""
        self.name = name
        self.tools = tools
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix=f"colony-{name}-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.with_scheduler = scheduler
        self.with_controller_manager = controller_manager
        self.with_kwok = kwok
        self.api_port = 0
        self.kubeconfig_path = self.workdir / "kubeconfig"
        self._processes: list[ManagedProcess] = []
        self._pki: ClusterPKI | None = None
        self.audit_policy = audit_policy
        self.audit_log_path: Path | None = self.workdir / "audit.log" if audit_policy is not None else None

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def server(self) -> str:
        """URL of the API server."""
        return f"https://127.0.0.1:{self.api_port}"

    def start(self) -> None:
        """Start every component and wait until the API server is ready."""
        try:
            self._pki = create_pki(self.workdir / "pki")
            self._start_etcd_and_apiserver()
            self.kubeconfig_path.write_text(self.kubeconfig())
            if self.with_scheduler:
                self._start_scheduler()
            if self.with_controller_manager:
                self._start_controller_manager()
            if self.with_kwok:
                self._start_kwok()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every component in reverse start order and remove the working directory."""
        for process in reversed(self._processes):
            process.stop()
        self._processes.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _spawn(self, name: str, argv: list[str]) -> ManagedProcess:
        process = ManagedProcess(f"{self.name}/{name}", argv, self.workdir / f"{name}.log")
        self._processes.append(process)
        process.start()
        return process

    def _start_etcd_and_apiserver(self) -> None:
        assert self._pki is not None
        pki = self._pki
        client_port, peer_port = free_port(), free_port()
        etcd = self._spawn(
            "etcd",
            [
                str(self.tools.binary("etcd")),
                "--name=default",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{client_port}",
                f"--advertise-client-urls=http://127.0.0.1:{client_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--max-request-bytes=4194304",
                "--log-level=warn",
            ],
        )
        etcd.wait_until(
            lambda: b'"health":"true"' in _http_get(f"http://127.0.0.1:{client_port}/health"),
            START_TIMEOUT_S,
            "healthy etcd",
        )
        self.api_port = free_port()
        audit_flags: list[str] = []
        if self.audit_policy is not None and self.audit_log_path is not None:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(self.audit_policy)
            audit_flags = [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log_path}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
            ]
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.tools.binary("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{client_port}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.client_ca}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                # No token controller runs, and no node-lifecycle controller lifts the not-ready
                # taint that TaintNodesByCondition puts on new (kwok) nodes.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                "--endpoint-reconciler-type=none",
                f"--service-account-issuer=https://127.0.0.1:{self.api_port}/",
                f"--service-account-key-file={pki.service_account_pub}",
                f"--service-account-signing-key-file={pki.service_account_key}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                "--profiling=false",
                "--v=0",
                *audit_flags,
            ],
        )
        context = ssl.create_default_context(cafile=str(pki.serving_ca))
        apiserver.wait_until(
            lambda: _http_get(f"{self.server}/readyz", context) == b"ok",
            START_TIMEOUT_S,
            "ready kube-apiserver (/readyz)",
        )

    def _spawn_component(self, name: str, extra_flags: list[str]) -> None:
        """Start kube-scheduler or kube-controller-manager and wait for its /healthz."""
        kubeconfig = str(self.kubeconfig_path)
        port = free_port()
        process = self._spawn(
            name,
            [
                str(self.tools.binary(name)),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                *extra_flags,
            ],
        )
        # The component serves a self-signed certificate of its own; only liveness is checked here.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        process.wait_until(
            lambda: _http_get(f"https://127.0.0.1:{port}/healthz", context) == b"ok",
            START_TIMEOUT_S,
            "healthy /healthz",
        )

    def _start_scheduler(self) -> None:
        self._spawn_component("kube-scheduler", [])

    def _start_controller_manager(self) -> None:
        assert self._pki is not None
        self._spawn_component(
            "kube-controller-manager",
            [
                f"--service-account-private-key-file={self._pki.service_account_key}",
                f"--root-ca-file={self._pki.serving_ca}",
                # kwok nodes have no kubelet leases to judge; don't let node lifecycle evict pods.
                "--controllers=*,-node-lifecycle-controller,-node-ipam-controller,-taint-eviction-controller",
            ],
        )

    def start_volcano_scheduler(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start Volcano's scheduler (needs the Volcano CRDs installed) and open its queues.

        It creates the `root` and `default` queues itself, but their state is set by Volcano's
        controller-manager, which does not run here; a queue without state schedules nothing.
        """
        conf_dir = self.workdir / "volcano-conf"
        conf_dir.mkdir(exist_ok=True)
        (conf_dir / "scheduler.conf").write_text(VOLCANO_SCHEDULER_CONF)
        process = self._spawn(
            "vc-scheduler",
            [
                str(self.tools.binary("vc-scheduler")),
                f"--kubeconfig={self.kubeconfig_path}",
                f"--scheduler-conf={conf_dir / 'scheduler.conf'}",
                "--leader-elect=false",
                "--schedule-period=500ms",
                "--cache-dumper=false",
                "-v=1",
            ],
        )
        for queue in ("root", "default"):

            def exists(name: str = queue) -> bool:
                return self.kubectl("get", "queue", name, check=False).returncode == 0

            process.wait_until(exists, timeout, f"queue {queue} created by the scheduler")
            self.kubectl(
                "patch",
                "queue",
                queue,
                "--subresource=status",
                "--type=merge",
                "-p",
                '{"status": {"state": "Open"}}',
            )

    def _start_kwok(self) -> None:
        config = self.workdir / "kwok.yaml"
        config.write_text(kwok_config(self.tools.upstream_crds / "kwok-stages"))
        self._spawn(
            "kwok",
            [
                str(self.tools.binary("kwok")),
                f"--kubeconfig={self.kubeconfig_path}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{free_port()}",
                f"--config={config}",
            ],
        )

    # -- client side -----------------------------------------------------------------------

    def kubeconfig(self, context_name: str | None = None) -> str:
        """A self-contained kubeconfig (embedded certificates) for the admin user."""
        assert self._pki is not None
        name = context_name or self.name

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": name,
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self._pki.serving_ca),
                    },
                }
            ],
            "users": [
                {
                    "name": f"{name}-admin",
                    "user": {
                        "client-certificate-data": b64(self._pki.admin_cert),
                        "client-key-data": b64(self._pki.admin_key),
                    },
                }
            ],
            "contexts": [{"name": name, "context": {"cluster": name, "user": f"{name}-admin"}}],
            "current-context": name,
        }
        return yaml.safe_dump(config)

    def kubectl(
        self, *args: str, input_text: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned kubectl against this cluster; raises KubectlError when `check` fails."""
        argv = [str(self.tools.kubectl), f"--kubeconfig={self.kubeconfig_path}", *args]
        result = subprocess.run(
            argv, input=input_text, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and result.returncode != 0:
            raise KubectlError(args, result.returncode, result.stderr)
        return result

    def apply(self, objects: Iterable[dict[str, Any]], *, server_side: bool = True) -> None:
        """Apply manifests (server-side by default, field manager `colony-devenv`).

        The objects travel as JSON: PyYAML writes YAML 1.1, where e.g. the string 1e-3 needs no
        quotes, but kubectl reads YAML 1.2 and would turn it into a number.
        """
        text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
        flags = ["--server-side", "--force-conflicts", "--field-manager=colony-devenv"] if server_side else []
        self.kubectl("apply", *flags, "-f", "-", input_text=text)

    def get_json(self, *args: str) -> Any:
        """`kubectl get ... -o json`, parsed."""
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def install_crds(self, files: Sequence[Path], timeout: float = 120) -> list[str]:
        """Install CRD files (server-side apply), wait until each is Established; returns names."""
        names = []
        for path in files:
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "CustomResourceDefinition":
                    names.append(doc["metadata"]["name"])
        if not names:
            return names
        file_args = [arg for path in files for arg in ("-f", str(path))]
        self.kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=colony-devenv",
            *file_args,
            timeout=timeout,
        )
        deadline = time.monotonic() + timeout
        while not self._have_condition("crd", names, "Established"):
            if time.monotonic() > deadline:
                raise ProcessFailed(f"CRDs of {self.name} not Established after {timeout:.0f}s: {names}")
            time.sleep(0.2)
        # Established does not mean the storage is ready: until it is, lists answer 429
        # "storage is (re)initializing". Wait until every new resource can be listed.
        while self.kubectl("get", ",".join(names), "-A", "-o", "name", check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise ProcessFailed(f"CRDs of {self.name} are established but not listable: {names}")
            time.sleep(0.2)
        return names

    def _have_condition(self, kind: str, names: Sequence[str], condition: str) -> bool:
        """Whether every named object has `condition` True (polled: `kubectl wait` errors out on
        objects that have no conditions yet, which happens on a loaded machine)."""
        found = self.get_json(*[f"{kind}/{name}" for name in names])
        items = found.get("items", [found])
        return len(items) == len(names) and all(
            any(
                c.get("type") == condition and c.get("status") == "True"
                for c in (item.get("status") or {}).get("conditions") or []
            )
            for item in items
        )

    def add_gpu_nodes(self, specs: Iterable[GPUNodeSpec], timeout: float = 60) -> list[str]:
        """Create kwok-managed GPU nodes and wait until they are Ready; returns node names."""
        if not self.with_kwok:
            raise ProcessFailed(f"cluster {self.name} runs without kwok; fake nodes would never be Ready")
        nodes = [node for spec in specs for node in gpu_node_manifests(spec)]
        self.apply(nodes, server_side=False)
        names = [node["metadata"]["name"] for node in nodes]
        deadline = time.monotonic() + timeout
        while not self._have_condition("node", names, "Ready"):
            if time.monotonic() > deadline:
                raise ProcessFailed(f"nodes of {self.name} not Ready after {timeout:.0f}s: {names}")
            time.sleep(0.2)
        return names


def _http_get(url: str, context: ssl.SSLContext | None = None) -> bytes:
    with urllib.request.urlopen(url, timeout=2, context=context) as response:
        body: bytes = response.read()
        return body
