"""The Colony resource: a set of Kubernetes clusters that GPU work can run on."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import ConfigDict, Field

from colony.api.base import (
    DNS_LABEL_PATTERN,
    DNS_SUBDOMAIN_PATTERN,
    MAX_LABEL,
    MAX_NAME,
    NAME_IS_A_LABEL_VALUE,
    SECRET_KEY_PATTERN,
    ApiModel,
    LabelSelector,
    PrinterColumn,
    ResourceDefinition,
    ResourceStatus,
    SecretKeyReference,
    cel_rules,
    object_name,
)

K8S_VERSION_PATTERN = r"^v1\.[0-9]+\.[0-9]+$"
CAPA_NODES_INSTANCE_PROFILE = "nodes.cluster-api-provider-aws.sigs.k8s.io"
"""The instance profile CAPA's bootstrap (clusterawsadm) creates for worker nodes: the only one a
colony may attach unless the admin allows more (COLONY_AWS_INSTANCE_PROFILES)."""


class DockerClusterSpec(ApiModel):
    """Worker machines as Docker containers on the management host (Cluster API provider Docker)."""

    replicas: int = Field(ge=0, le=100, description="Number of worker machines.")


class AwsClusterSpec(ApiModel):
    """Worker machines as EC2 instances (Cluster API provider AWS)."""

    replicas: int = Field(ge=0, le=1000, description="Number of worker machines (EC2 instances).")
    region: str = Field(min_length=1, description="AWS region of the cluster, e.g. us-east-1.")
    instance_type: str = Field(min_length=1, description="EC2 instance type of the workers, e.g. g5.xlarge.")
    ami: str | None = Field(
        default=None,
        pattern=r"^ami-[0-9a-f]+$",
        description="AMI id of the worker image; it must exist in the region.",
    )
    ssh_key_name: str | None = Field(default=None, description="Name of an EC2 key pair for SSH access.")
    iam_instance_profile: str = Field(
        default=CAPA_NODES_INSTANCE_PROFILE,
        description="IAM instance profile attached to the workers; one the operator's admin allows "
        "(default: only CAPA's nodes profile).",
    )
    spot: bool = Field(default=False, description="Run the workers on EC2 spot instances.")
    spot_max_price: float | None = Field(
        default=None,
        gt=0,
        description="Highest spot price in USD per instance-hour; default: up to the on-demand price.",
    )


class RemoteHost(ApiModel):
    """An on-prem machine reachable over SSH that joins the colony as a worker."""

    address: str = Field(min_length=1, description="IP address or DNS name of the host.")
    port: int = Field(default=22, ge=1, le=65535, description="SSH port of the host.")
    user: str = Field(default="root", min_length=1, description="SSH user.")
    use_sudo: bool = Field(default=False, description="Run the join commands with sudo.")
    ssh_key_secret_ref: SecretKeyReference = Field(
        description="Secret holding the SSH private key (never put the key itself in the spec)."
    )


class RemoteClusterSpec(ApiModel):
    """Bare on-prem hosts joined over SSH (k0smotron RemoteCluster / RemoteMachine)."""

    hosts: list[RemoteHost] = Field(
        min_length=1, max_length=256, description="The hosts that become the cluster's workers."
    )


class ExistingClusterSpec(ApiModel):
    """An already running cluster registered by its kubeconfig; no Cluster API objects are created."""

    kubeconfig_secret_ref: SecretKeyReference = Field(
        description="Secret in the colony's namespace holding the cluster's kubeconfig."
    )


PROVIDERS = ("docker", "aws", "remote", "existing")
_ENABLED_FLAGS = (("dockerEnabled", "docker"), ("awsEnabled", "aws"), ("remoteClusterEnabled", "remote"))
_PROVIDER_RULES = cel_rules(
    (
        " + ".join(f"(has(self.{p}) ? 1 : 0)" for p in PROVIDERS) + " == 1",
        "each colony cluster needs exactly one provider block: docker, aws, remote or existing",
    ),
    *(
        (
            f"!has(self.{flag}) || self.{flag} == has(self.{block})",
            f"{flag} must agree with the presence of the {block} block",
        )
        for flag, block in _ENABLED_FLAGS
    ),
)


class ColonyCluster(ApiModel):
    """One Kubernetes cluster of the colony, on exactly one provider."""

    model_config = ConfigDict(json_schema_extra=_PROVIDER_RULES)

    cluster_name: str = Field(
        min_length=1,
        max_length=40,
        pattern=DNS_LABEL_PATTERN,
        description="Name of the cluster, unique within the colony (a DNS label).",
    )
    docker_enabled: bool | None = Field(default=None, description="Marks a docker cluster (seed syntax).")
    docker: DockerClusterSpec | None = Field(default=None, description="Docker provider settings.")
    aws_enabled: bool | None = Field(default=None, description="Marks an AWS cluster (seed syntax).")
    aws: AwsClusterSpec | None = Field(default=None, description="AWS provider settings.")
    remote_cluster_enabled: bool | None = Field(
        default=None, description="Marks an on-prem SSH cluster (seed syntax)."
    )
    remote: RemoteClusterSpec | None = Field(default=None, description="On-prem SSH hosts.")
    existing: ExistingClusterSpec | None = Field(
        default=None, description="An already running cluster, registered by kubeconfig."
    )
    price_per_hour: float | None = Field(
        default=None,
        ge=0,
        description="Declared price of the cluster in USD per hour (for on-prem and existing clusters).",
    )

    @property
    def provider(self) -> str:
        """Which provider block this cluster uses: docker, aws, remote or existing."""
        for name in PROVIDERS:
            if getattr(self, name) is not None:
                return name
        raise ValueError(f"cluster {self.cluster_name!r} has no provider block")


class WorkloadDependency(ApiModel):
    """A dependency from the operator's built-in add-on catalog, selected by name."""

    name: str = Field(
        min_length=1,
        max_length=MAX_LABEL,
        pattern=DNS_LABEL_PATTERN,
        description="Catalog name, e.g. volcano-sh or nvidia-operator (a DNS label: it names the add-on's "
        "objects and labels).",
    )


HELM_REPO_URL_PATTERN = r"^(https|oci)://[A-Za-z0-9.\-\[\]:]+(/[A-Za-z0-9._~%/:@+-]*)?$"
"""A chart repository: https:// or oci:// (never file://, http:// or a local path), no query string."""

FORBIDDEN_TEMPLATE_FUNCTIONS = ("env", "expandenv", "getHostByName")
"""Sprig functions a tenant's valuesTemplate may not call: CAAPH renders the template inside its
controller, so `env`/`expandenv` would read the controller's environment and `getHostByName`
would resolve names from the management cluster."""

_TEMPLATE_LITERAL = r"\x22(?:[^\x22\\]|\\.)*\x22|\x27(?:[^\x27\\]|\\.)*\x27|\x60[^\x60]*\x60"
FORBIDDEN_TEMPLATE_CALL_PATTERN = (
    r"\{\{(?:(?:[^}\x22\x27\x60]|"
    + _TEMPLATE_LITERAL
    + r")*[^0-9A-Za-z_.$}\x22\x27\x60])?(?:"
    + "|".join(FORBIDDEN_TEMPLATE_FUNCTIONS)
    + r")\b"
)
"""RE2: a forbidden function name used as an identifier inside a Go template action. From each
`{{` it steps over string, raw-string and character literals (as Go's lexer does) and stops at
`}`; the name must not follow an identifier character, `.` (a field) or `$` (a variable). The
operator checks the same at render time with a lexer (render/go_templates.py)."""
MAX_VALUES_TEMPLATE = 16384
"""Bound of valuesTemplate: the CEL rule's static cost (4 bytes per character x 32 dependencies x
the regular expression) must stay inside the API server's per-rule budget."""


class HelmSecretReference(ApiModel):
    """A Secret in the colony's namespace (CAAPH's SecretReference without its namespace field: a
    tenant's colony never names another namespace's Secret)."""

    name: str = object_name("Name of the Secret, in the colony's namespace (a DNS subdomain).")


class HelmCredentials(ApiModel):
    """OCI registry credentials for the chart, from a Secret in the colony's namespace."""

    secret: HelmSecretReference = Field(description="Secret holding the registry credentials.")
    key: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_NAME,
        pattern=SECRET_KEY_PATTERN,
        description="Key inside the Secret's data (CAAPH's default: config.json).",
    )


class HelmTlsConfig(ApiModel):
    """TLS settings for the chart repository."""

    ca_secret: HelmSecretReference | None = Field(
        default=None, description="Secret in the colony's namespace holding the repository's CA (ca.crt)."
    )
    insecure_skip_tls_verify: bool | None = Field(
        default=None,
        alias="insecureSkipTLSVerify",
        description="Skip verification of the repository's certificate.",
    )


class HelmChartProxySpec(ApiModel):
    """The CAAPH HelmChartProxySpec fields a colony may set; every other field is unknown (rejected
    at admission, pruned by lax clients, dropped by this model) and never reaches CAAPH."""

    cluster_selector: LabelSelector | None = Field(
        default=None, description="Labels of the colony clusters that get this chart."
    )
    repo_url: str = Field(
        alias="repoURL",
        min_length=1,
        max_length=512,
        pattern=HELM_REPO_URL_PATTERN,
        description="URL of the Helm repository holding the chart (https:// or oci://).",
    )
    chart_name: str = Field(min_length=1, description="Name of the chart in the repository.")
    version: str | None = Field(default=None, description="Chart version; pin it for reproducibility.")
    release_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=53,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Name of the Helm release (Helm's rule: a DNS subdomain of at most 53 characters).",
    )
    namespace: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_LABEL,
        pattern=DNS_LABEL_PATTERN,
        description="Namespace to install the release into (a DNS label).",
    )
    values_template: str | None = Field(
        default=None,
        max_length=MAX_VALUES_TEMPLATE,
        description="Go template rendered into values by CAAPH (sprig functions, except "
        + ", ".join(FORBIDDEN_TEMPLATE_FUNCTIONS)
        + ").",
        json_schema_extra=cel_rules(
            (
                "!self.matches(r'" + FORBIDDEN_TEMPLATE_CALL_PATTERN + "')",
                "valuesTemplate may not call " + ", ".join(FORBIDDEN_TEMPLATE_FUNCTIONS),
            )
        ),
    )
    reconcile_strategy: Literal["Continuous", "InstallOnce"] | None = Field(
        default=None, description="Continuous (default) or InstallOnce."
    )
    options: dict[str, Any] | None = Field(
        default=None,
        description="CAAPH install/upgrade options (wait, timeout, install.createNamespace, ...).",
        json_schema_extra={"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    )
    credentials: HelmCredentials | None = Field(
        default=None, description="OCI registry credentials, from a Secret in the colony's namespace."
    )
    tls_config: HelmTlsConfig | None = Field(
        default=None, alias="tlsConfig", description="TLS settings for the repository."
    )


class AdditionalDependency(ApiModel):
    """A Helm chart not in the built-in catalog, given as a CAAPH HelmChartProxySpec."""

    name: str = Field(
        min_length=1, max_length=63, pattern=DNS_LABEL_PATTERN, description="Name of the dependency."
    )
    spec: HelmChartProxySpec = Field(description="The HelmChartProxySpec to install on the clusters.")


class ColonySpec(ApiModel):
    """Desired state of a Colony."""

    k8s_version: str = Field(
        alias="k8sVersion",
        pattern=K8S_VERSION_PATTERN,
        description="Kubernetes version of the colony's clusters, e.g. v1.30.3.",
    )
    workload_dependencies: list[WorkloadDependency] = Field(
        default_factory=list,
        max_length=32,
        description="Built-in add-ons to install on every cluster of the colony.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    additional_dependencies: list[AdditionalDependency] = Field(
        default_factory=list,
        max_length=32,
        description="Extra Helm charts, as CAAPH HelmChartProxy specs.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    hosted_control_plane_enabled: bool = Field(
        default=False,
        description="Run the clusters' control planes as pods in the management cluster (k0smotron).",
    )
    external_address: str | None = Field(
        default=None, description="Address under which hosted control planes are reachable."
    )
    colony_clusters: list[ColonyCluster] = Field(
        min_length=1,
        max_length=16,
        description="The clusters of the colony; clusterName must be unique.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["clusterName"]},
    )


ColonyPhase = Literal["Pending", "Provisioning", "Ready", "Degraded", "Deleting", "Failed"]
ClusterPhase = Literal["Pending", "Provisioning", "Ready", "Unreachable", "Failed", "Deleting"]


class GPUInventoryStatus(ApiModel):
    """GPUs of one product in a cluster, read from its Nodes."""

    product: str = Field(description="GPU product, from the nvidia.com/gpu.product node label.")
    capacity: int = Field(description="nvidia.com/gpu capacity summed over the cluster's nodes.")
    allocatable: int = Field(description="nvidia.com/gpu allocatable summed over Ready nodes.")


class HostedControlPlaneStatus(ApiModel):
    """Service ports of a hosted control plane, allocated once and kept."""

    api_port: int = Field(description="NodePort of the hosted Kubernetes API server.")
    konnectivity_port: int = Field(description="NodePort of the konnectivity server.")


class ColonyClusterStatus(ApiModel):
    """Observed state of one cluster of the colony."""

    name: str = Field(description="clusterName from the spec.")
    provider: str = Field(description="docker, aws, remote or existing.")
    phase: ClusterPhase = Field(description="State of this cluster.")
    message: str = Field(default="", description="Why the cluster is in this phase.")
    capi_cluster: str | None = Field(default=None, description="Name of the Cluster API Cluster.")
    control_plane_endpoint: str | None = Field(default=None, description="host:port of the API server.")
    hosted_control_plane: HostedControlPlaneStatus | None = Field(
        default=None, description="Ports of the hosted control plane, when hostedControlPlaneEnabled."
    )
    ready_nodes: int = Field(default=0, description="Nodes whose Ready condition is True.")
    total_nodes: int = Field(default=0, description="Nodes registered in the cluster.")
    gpus: list[GPUInventoryStatus] = Field(default_factory=list, description="GPUs by product.")
    price_per_hour: float | None = Field(
        default=None, description="Price of the cluster in USD per hour (unknown: absent)."
    )
    price_source: str | None = Field(
        default=None, description="Where the price comes from: the spec, the offer catalog, or why unknown."
    )


class AddonStatus(ApiModel):
    """Aggregated state of one dependency (a HelmChartProxy and its HelmReleaseProxies)."""

    name: str = Field(description="Dependency name.")
    helm_chart_proxy: str = Field(description="Name of the HelmChartProxy rendered for it.")
    ready: bool = Field(description="Whether the release is deployed on every matching cluster.")
    message: str = Field(default="", description="Details, e.g. which cluster is not ready.")


class ColonyStatus(ResourceStatus):
    """Observed state of a Colony."""

    phase: ColonyPhase | None = Field(default=None, description="High-level summary of the colony's state.")
    total_clusters: int | None = Field(default=None, description="Number of clusters in the spec.")
    ready_clusters: int | None = Field(default=None, description="Number of clusters that are ready.")
    gpus: int | None = Field(default=None, description="GPU capacity of the ready clusters.")
    clusters: list[ColonyClusterStatus] = Field(
        default_factory=list, description="Per-cluster state and GPU inventory."
    )
    addons: list[AddonStatus] = Field(default_factory=list, description="Per-dependency readiness.")
    price_per_hour: float | None = Field(
        default=None, description="USD per hour of the clusters now billed (provisioning or running)."
    )
    cost_accrued: float | None = Field(default=None, description="USD accrued since the colony was created.")
    cost_accrued_at: datetime | None = Field(
        default=None, description="When costAccrued was last brought forward."
    )


COLONY = ResourceDefinition(
    group="infra.exalsius.ai",
    version="v1",
    kind="Colony",
    plural="colonies",
    singular="colony",
    short_names=("col",),
    root_rules=(NAME_IS_A_LABEL_VALUE,),  # the colony label of its clusters and add-ons
    spec_model=ColonySpec,
    status_model=ColonyStatus,
    description="A Colony is a set of Kubernetes clusters (AWS, Docker, on-prem SSH hosts or existing "
    "clusters) provisioned through Cluster API, with GPU add-ons installed.",
    printer_columns=(
        PrinterColumn("Phase", "string", ".status.phase", "High-level state of the colony."),
        PrinterColumn("Ready", "integer", ".status.readyClusters", "Clusters that are ready."),
        PrinterColumn("Clusters", "integer", ".status.totalClusters", "Clusters in the colony."),
        PrinterColumn("GPUs", "integer", ".status.gpus", "GPU capacity of the ready clusters."),
        PrinterColumn("$/h", "number", ".status.pricePerHour", "USD per hour of the billed clusters."),
        PrinterColumn("Cost", "number", ".status.costAccrued", "USD accrued so far."),
        PrinterColumn("K8s", "string", ".spec.k8sVersion", "Kubernetes version.", priority=1),
        PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation."),
    ),
)
