"""The colony's `k8sVersion` in the version format each component expects.

One Kubernetes version, e.g. ``v1.30.3``, is written three ways:

- **Cluster API** (``Machine.spec.version``, ``MachineDeployment.spec.template.spec.version``): the
  plain Kubernetes semver, ``v1.30.3``. CAPD also uses it to pick the ``kindest/node`` image.
- **k0s** (``K0sControlPlane.spec.version``, ``K0sWorkerConfig[Template] ... version``): a k0s
  release, which is the Kubernetes version plus build metadata ``+k0s.<n>``: ``v1.30.3+k0s.0``.
- **k0smotron hosted control plane** (``K0smotronControlPlane.spec.version``): the tag of the
  ``k0sproject/k0s`` container image; OCI tags cannot contain ``+``, so k0s publishes the same
  release as ``v1.30.3-k0s.0``.

We always take the first k0s build (``k0s.0``) of a Kubernetes patch release.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(r"^v1\.(?P<minor>0|[1-9][0-9]*)\.(?P<patch>0|[1-9][0-9]*)$")
K0S_BUILD = 0


@dataclass(frozen=True)
class KubernetesVersion:
    """A validated Kubernetes version `v1.<minor>.<patch>` and its per-component spellings."""

    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> KubernetesVersion:
        """Parse `v1.<minor>.<patch>`; ValueError (with the expected format) otherwise."""
        match = _VERSION.match(text)
        if match is None:
            raise ValueError(f"k8sVersion {text!r} is not of the form v1.<minor>.<patch>, e.g. v1.30.3")
        return cls(minor=int(match["minor"]), patch=int(match["patch"]))

    @property
    def capi(self) -> str:
        """Cluster API Machine version, e.g. v1.30.3."""
        return f"v1.{self.minor}.{self.patch}"

    @property
    def k0s(self) -> str:
        """k0s release, e.g. v1.30.3+k0s.0 (K0sControlPlane, K0sWorkerConfig)."""
        return f"{self.capi}+k0s.{K0S_BUILD}"

    @property
    def k0s_image_tag(self) -> str:
        """k0s container image tag, e.g. v1.30.3-k0s.0 (K0smotronControlPlane)."""
        return f"{self.capi}-k0s.{K0S_BUILD}"
