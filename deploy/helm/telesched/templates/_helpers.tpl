{{/*
Labels of the agent's objects.
*/}}
{{- define "telesched.agentLabels" -}}
app.kubernetes.io/name: telesched-agent
app.kubernetes.io/part-of: telesched
{{- end }}

{{/*
Labels of the scheduler's objects.
*/}}
{{- define "telesched.schedulerLabels" -}}
app.kubernetes.io/name: telesched-scheduler
app.kubernetes.io/part-of: telesched
{{- end }}

{{/*
An image reference: repository:tag, the tag defaulting to the appVersion.
*/}}
{{- define "telesched.image" -}}
{{ .image.repository }}:{{ .image.tag | default .chart.AppVersion }}
{{- end }}

{{/*
Checks across values that the schema cannot express. Included by every
template that depends on them, so a bad combination stops the render.
*/}}
{{- define "telesched.validate" -}}
{{- $maxAge := include "telesched.seconds" .Values.shared.telemetryMaxAgeReadyAgent | int -}}
{{- $heartbeat := include "telesched.seconds" .Values.agent.heartbeat | int -}}
{{- if le $maxAge $heartbeat -}}
{{- fail (printf "shared.telemetryMaxAgeReadyAgent (%s) must be longer than agent.heartbeat (%s): a quiet node writes its NodeTelemetry only once a heartbeat, and the scheduler would read every quiet node as stale" .Values.shared.telemetryMaxAgeReadyAgent .Values.agent.heartbeat) -}}
{{- end -}}
{{- if eq (.Values.agent.healthPort | int) (.Values.agent.metricsPort | int) -}}
{{- fail (printf "agent.healthPort (%d) must differ from agent.metricsPort: the probes need a listener of their own, outside the metrics server's connection cap" (.Values.agent.healthPort | int)) -}}
{{- end -}}
{{- end }}

{{/*
Whole seconds of a duration written as Go writes them (90s, 2m, 1h30m,
1m30s). values.schema.json admits only h, m and s units.
*/}}
{{- define "telesched.seconds" -}}
{{- $total := 0 -}}
{{- range $part := regexFindAll "[0-9]+[hms]" . -1 -}}
{{- $n := trimSuffix "h" (trimSuffix "m" (trimSuffix "s" $part)) | int -}}
{{- if hasSuffix "h" $part -}}{{- $total = add $total (mul $n 3600) -}}
{{- else if hasSuffix "m" $part -}}{{- $total = add $total (mul $n 60) -}}
{{- else -}}{{- $total = add $total $n -}}{{- end -}}
{{- end -}}
{{- $total -}}
{{- end }}
