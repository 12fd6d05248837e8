{{/*
The labels every object carries: the same as kustomize's base adds, so that
objects installed either way are found by the same selector.
*/}}
{{- define "phalanx.labels" -}}
app.kubernetes.io/part-of: phalanx
{{- end }}

{{/* The image of both binaries; the tag defaults to the chart's appVersion. */}}
{{- define "phalanx.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The schedulerName the profile serves, from the mode. */}}
{{- define "phalanx.schedulerName" -}}
{{- if eq .Values.mode "second-scheduler" -}}
phalanx-scheduler
{{- else if eq .Values.mode "replace-default" -}}
default-scheduler
{{- else -}}
{{- fail (printf "mode must be second-scheduler or replace-default, not %q" .Values.mode) -}}
{{- end -}}
{{- end }}
