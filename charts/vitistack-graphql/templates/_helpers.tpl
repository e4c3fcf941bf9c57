{{/* Chart name, truncated to the 63 characters Kubernetes allows in a name. */}}
{{- define "vitistack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name. */}}
{{- define "vitistack.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "vitistack.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "vitistack.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "vitistack.selectorLabels" -}}
app.kubernetes.io/name: {{ include "vitistack.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "vitistack.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "vitistack.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Secret holding DATABASE_URL: the user's, or the chart's when a URL is given inline. */}}
{{- define "vitistack.databaseSecret" -}}
{{- if .Values.database.existingSecret }}
{{- .Values.database.existingSecret }}
{{- else if .Values.database.url }}
{{- printf "%s-database" (include "vitistack.fullname" .) }}
{{- end }}
{{- end }}

{{/* More than one pod may run (replicaCount > 1, or the autoscaler). */}}
{{- define "vitistack.multiple" -}}
{{- if or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1) }}true{{- end }}
{{- end }}

{{/* Leader election: on, off, or (auto) on whenever more than one pod may run. */}}
{{- define "vitistack.leaderElection" -}}
{{- $mode := toString .Values.leaderElection.mode }}
{{- if or (eq $mode "on") (and (eq $mode "auto") (include "vitistack.multiple" .)) }}true{{- end }}
{{- end }}
