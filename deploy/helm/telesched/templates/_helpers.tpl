{{/*
The labels every object of the chart carries (Helm's and Kubernetes'
recommended set): app.kubernetes.io/name is the object's own (telesched-agent,
telesched-scheduler, ...), instance is the release's name, and commonLabels
go on top. Takes a dict: root (the chart's context), name, component.
*/}}
{{- define "telesched.labels" -}}
{{- $l := dict
  "helm.sh/chart" (printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-")
  "app.kubernetes.io/name" .name
  "app.kubernetes.io/instance" .root.Release.Name
  "app.kubernetes.io/version" .root.Chart.AppVersion
  "app.kubernetes.io/managed-by" .root.Release.Service
  "app.kubernetes.io/part-of" "telesched" -}}
{{- with .component }}{{ $_ := set $l "app.kubernetes.io/component" . }}{{ end -}}
{{- toYaml (merge $l (.root.Values.commonLabels | default dict)) -}}
{{- end }}

{{/*
Labels of the agent's objects.
*/}}
{{- define "telesched.agentLabels" -}}
{{ include "telesched.labels" (dict "root" . "name" "telesched-agent" "component" "node-agent") }}
{{- end }}

{{/*
Labels of the scheduler's objects.
*/}}
{{- define "telesched.schedulerLabels" -}}
{{ include "telesched.labels" (dict "root" . "name" "telesched-scheduler" "component" "scheduler") }}
{{- end }}

{{/*
Labels of the descheduler's objects.
*/}}
{{- define "telesched.deschedulerLabels" -}}
{{ include "telesched.labels" (dict "root" . "name" "telesched-descheduler" "component" "descheduler") }}
{{- end }}

{{/*
Labels of a workload's pods: its selector's labels, which are 0.1.0's and
must stay as they are (a DaemonSet's and a Deployment's spec.selector are
immutable, so `helm upgrade` from 0.1.0 fails if they change;
test/deploy's TestHelmSelectorsMatchPreviousChart holds them), the other
standard labels, then the workload's podLabels. The agents' selector has
app.kubernetes.io/instance set to the DaemonSet's name (telesched-agent,
telesched-agent-gpu), as in 0.1.0, so their pods carry that instance, not
the release's. Takes a dict: root, selector (a dict), name, component,
podLabels.
*/}}
{{- define "telesched.podLabels" -}}
{{- $std := include "telesched.labels" (dict "root" .root "name" .name "component" .component) | fromYaml -}}
{{- $labels := merge (deepCopy .selector) (.podLabels | default dict) $std -}}
{{- toYaml $labels -}}
{{- end }}

{{/*
The objects of one of files/ (copies of deploy/, read as they are), each
with the chart's labels added to its own (its own name label stays), and,
for a ServiceAccount, the serviceAccount's labels and annotations. Takes a
dict: root, content (the file's text), component, serviceAccount (a dict
with labels and annotations; may be empty), annotations (added to every
object; may be empty).
*/}}
{{- define "telesched.fileObjects" -}}
{{- $root := .root -}}
{{- $component := .component -}}
{{- $sa := .serviceAccount | default dict -}}
{{- $extra := .annotations | default dict -}}
{{- $first := true -}}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" .content -1 -}}
{{- $obj := fromYaml $doc -}}
{{- if $obj.Error -}}{{- fail (printf "a file of the chart does not parse: %s" $obj.Error) -}}{{- end -}}
{{- if $obj.kind -}}
{{- $meta := $obj.metadata -}}
{{- $std := include "telesched.labels" (dict "root" $root "name" ($meta.labels | default dict | dig "app.kubernetes.io/name" "telesched") "component" $component) | fromYaml -}}
{{- $labels := merge ($meta.labels | default dict) $std -}}
{{- $annotations := merge ($meta.annotations | default dict) $extra -}}
{{- if eq $obj.kind "ServiceAccount" -}}
{{- $labels = merge (deepCopy ($sa.labels | default dict)) $labels -}}
{{- $annotations = merge (deepCopy ($sa.annotations | default dict)) $annotations -}}
{{- end -}}
{{- $_ := set $meta "labels" $labels -}}
{{- if $annotations -}}{{- $_ := set $meta "annotations" $annotations -}}{{- end -}}
{{- if not $first }}
---
{{ end -}}
{{- $first = false -}}
{{ toYaml $obj }}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
An image reference: repository:tag, the tag defaulting to the appVersion,
or repository@digest when a digest is set; with registry set (the values'
image.registry), the repository's last path element under it.
*/}}
{{- define "telesched.image" -}}
{{- $repo := .image.repository -}}
{{- with .registry -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" .) (base $repo) -}}
{{- end -}}
{{- if .image.digest -}}
{{ $repo }}@{{ .image.digest }}
{{- else -}}
{{ $repo }}:{{ .image.tag | default .chart.AppVersion }}
{{- end -}}
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
