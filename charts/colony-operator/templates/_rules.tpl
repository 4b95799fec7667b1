{{/*
RBAC rules of the operator (see rbac.yaml). Every entry names what uses it; the RBAC audit test
(tests/integration/test_rbac_audit.py) fails when a rule is missing or unused.
*/}}

{{/* Rules that are cluster-wide whatever watchNamespaces says. */}}
{{- define "colony-operator.rules.cluster" -}}
# kopf discovers the served resources by watching the CRDs.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
# The GPR scheduler keeps every colony and request in its informers (shared colonies, cluster-wide
# queues), and hosted control-plane ports are allocated against every colony's recorded ports.
- apiGroups: [infra.exalsius.ai]
  resources: [colonies, gpuprovisioningrequests]
  verbs: [list, watch]
# GPUQueues are cluster-scoped: watched for quota changes, their usage written to status.
- apiGroups: [infra.exalsius.ai]
  resources: [gpuqueues]
  verbs: [list, watch]
- apiGroups: [infra.exalsius.ai]
  resources: [gpuqueues/status]
  verbs: [patch]
# ColonyShares (cluster-scoped, created by the admin only) say which namespaces may use a colony of
# another namespace: listed by the GPR scheduler and by placement every pass.
- apiGroups: [infra.exalsius.ai]
  resources: [colonyshares]
  verbs: [list]
# Placement: WorkloadDefinitions and PlacementPolicies are read every pass; whether each definition
# was accepted, and each policy's counts, are written to their status.
- apiGroups: [infra.exalsius.ai]
  resources: [placementpolicies, workloaddefinitions]
  verbs: [list]
- apiGroups: [infra.exalsius.ai]
  resources: [placementpolicies/status, workloaddefinitions/status]
  verbs: [patch]
{{- if .Values.placement.kinds }}
# Framework objects to place (placement.kinds), read in every namespace.
{{- end }}
{{- range .Values.placement.kinds }}
{{- $parts := splitn "." 2 . }}
- apiGroups: [{{ $parts._1 }}]
  resources: [{{ $parts._0 }}]
  verbs: [list]
{{- end }}
{{- if include "colony-operator.namespacedRbac" . }}
# kopf in namespaced mode follows which namespaces exist (placement reads their labels too).
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list, watch]
{{- else }}
# PlacementPolicies select namespaces by their labels.
- apiGroups: [""]
  resources: [namespaces]
  verbs: [list]
{{- end }}
{{- end -}}

{{/* Rules in the watched namespaces (a Role each, or the ClusterRole when watching all). */}}
{{- define "colony-operator.rules.namespaced" -}}
# Colonies: kopf handlers (finalizers, progress annotations); created for GPU requests (server-side
# apply) and deleted when ephemeral and unused.
- apiGroups: [infra.exalsius.ai]
  resources: [colonies]
  verbs: [create, delete, get, patch, watch]
# GPRs: the scheduling loop's finalizer while a request holds GPUs (patch; get after a conflict);
# created for DDPJobs with gpuTypes and deleted when the job ends (watched cluster-wide, above).
- apiGroups: [infra.exalsius.ai]
  resources: [gpuprovisioningrequests]
  verbs: [create, delete, get, patch]
- apiGroups: [infra.exalsius.ai]
  resources: [colonies/status, gpuprovisioningrequests/status]
  verbs: [patch]
# DDPJobs: kopf handlers; active jobs of a colony are counted; expired jobs (ttlSecondsAfterFinished)
# are deleted.
- apiGroups: [training.exalsius.ai]
  resources: [ddpjobs]
  verbs: [delete, list, patch, watch]
- apiGroups: [training.exalsius.ai]
  resources: [ddpjobs/status]
  verbs: [patch]
{{- if .Values.placement.kinds }}
# Placed framework objects (placement.kinds): finalizer and placement annotations; their status is
# mirrored from the copy in the colony.
{{- end }}
{{- range .Values.placement.kinds }}
{{- $parts := splitn "." 2 . }}
- apiGroups: [{{ $parts._1 }}]
  resources: [{{ $parts._0 }}, {{ $parts._0 }}/status]
  verbs: [patch]
{{- end }}
# Events on every state change (kopf, the GPR scheduler and placement).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# Secrets, by name only (never list or watch: the operator cannot enumerate a namespace's Secrets):
# colony clusters' <cluster>-kubeconfig Secrets and W&B key references are read; a plain wandbApiKey
# is moved into <job>-wandb (server-side apply; owned by the job, so garbage-collected with it: the
# operator deletes no Secret here).
- apiGroups: [""]
  resources: [secrets]
  verbs: [create, get, patch]
# The workers of a DDPJob without targetColony: Service, Volcano PodGroup and pods (created, never
# changed: an attempt's objects are fixed; the job's namespace exists, the DDPJob is in it). Tracking
# watches the pods of the namespace labelled as the operator's (one watch, not a LIST per job and tick).
- apiGroups: [""]
  resources: [pods]
  verbs: [create, delete, list, watch]
- apiGroups: [""]
  resources: [services]
  verbs: [create, delete, list]
- apiGroups: [scheduling.volcano.sh]
  resources: [podgroups]
  verbs: [create, delete, list]
# Cluster API objects of each colony cluster (server-side applied, pruned, deleted with the colony);
# Cluster events refresh the colony's status.
- apiGroups: [cluster.x-k8s.io]
  resources: [clusters]
  verbs: [create, delete, list, patch, watch]
- apiGroups: [cluster.x-k8s.io]
  resources: [machinedeployments, machines]
  verbs: [create, delete, list, patch]
- apiGroups: [infrastructure.cluster.x-k8s.io]
  resources: [awsclusters, awsmachinetemplates, dockerclusters, dockermachinetemplates, remoteclusters, remotemachines]
  verbs: [create, delete, list, patch]
- apiGroups: [bootstrap.cluster.x-k8s.io]
  resources: [k0sworkerconfigs, k0sworkerconfigtemplates]
  verbs: [create, delete, list, patch]
- apiGroups: [controlplane.cluster.x-k8s.io]
  resources: [k0scontrolplanes, k0smotroncontrolplanes]
  verbs: [create, delete, list, patch]
# CAAPH: one HelmChartProxy per add-on; the HelmReleaseProxies CAAPH creates report readiness.
- apiGroups: [addons.cluster.x-k8s.io]
  resources: [helmchartproxies]
  verbs: [create, delete, list, patch]
- apiGroups: [addons.cluster.x-k8s.io]
  resources: [helmreleaseproxies]
  verbs: [list]
{{- end -}}
