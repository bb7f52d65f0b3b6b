{{/*
The prefix of every object's name: "task-operator" for a release named
task-operator (as install.yaml names them), else <release>-task-operator.
*/}}
{{- define "task-operator.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
Helm's labels, on every object besides the ones install.yaml has (the CRDs
carry app.kubernetes.io/version from config/crd already).
*/}}
{{- define "task-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/*
The metrics port's name and number: HTTPS on 8443 with metrics.secure (the
default), plain HTTP on 8080 without.
*/}}
{{- define "task-operator.metricsPortName" -}}
{{ if .Values.metrics.secure }}https-metrics{{ else }}http-metrics{{ end }}
{{- end -}}
{{- define "task-operator.metricsPort" -}}
{{ if .Values.metrics.secure }}8443{{ else }}8080{{ end }}
{{- end -}}

{{- define "task-operator.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
