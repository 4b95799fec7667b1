{{/* The release's base name: the chart name, or nameOverride. */}}
{{- define "colony-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Name of the Deployment, ServiceAccount, Service and RBAC objects. */}}
{{- define "colony-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "colony-operator.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "colony-operator.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "colony-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "colony-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "colony-operator.labels" -}}
{{ include "colony-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "colony-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "colony-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
"true" when RBAC is namespaced: watchNamespaces lists only exact names (kopf also takes glob
patterns such as team-*, which no Role can name; with a pattern the chart falls back to cluster-wide
grants and NOTES.txt says so).
*/}}
{{- define "colony-operator.namespacedRbac" -}}
{{- $exact := true -}}
{{- range .Values.watchNamespaces -}}
{{- if regexMatch "[*?!\\[\\]]" . -}}{{- $exact = false -}}{{- end -}}
{{- end -}}
{{- if and .Values.watchNamespaces $exact -}}true{{- end -}}
{{- end -}}

{{/* The Lease of leader election (in the release namespace). */}}
{{- define "colony-operator.leaseName" -}}
{{- printf "%s-leader" (include "colony-operator.fullname" . | trunc 56 | trimSuffix "-") -}}
{{- end -}}

{{/* Fail on replica and leader-election values that cannot work together. */}}
{{- define "colony-operator.validateLeaderElection" -}}
{{- $le := .Values.leaderElection -}}
{{- if and (gt (int .Values.replicaCount) 1) (not $le.enabled) -}}
{{- fail "replicaCount > 1 needs leaderElection.enabled: only the leader may run the handlers" -}}
{{- end -}}
{{- if and $le.enabled (not (and (lt (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) (lt (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds)))) -}}
{{- fail "leaderElection needs retryPeriodSeconds < renewDeadlineSeconds < leaseDurationSeconds" -}}
{{- end -}}
{{- end -}}
