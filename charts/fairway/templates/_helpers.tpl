{{/*
Names are fixed, not derived from the release: the components find each other by them (the
webhook's Service and Secret, the scheduler's Lease), and one fairway runs per cluster.
*/}}

{{/* The labels of every object: Kubernetes' recommended ones plus commonLabels. */}}
{{- define "fairway.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: fairway
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: fairway
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The labels of one component's objects; call with (dict "ctx" $ "component" "scheduler"). */}}
{{- define "fairway.componentLabels" -}}
{{ include "fairway.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The selector of one component's pods; stable across upgrades. */}}
{{- define "fairway.selectorLabels" -}}
app.kubernetes.io/name: fairway
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* The image of every component. */}}
{{- define "fairway.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* Spread a Deployment's replicas over nodes when nothing else is asked. */}}
{{- define "fairway.spreadAffinity" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
  - weight: 100
    podAffinityTerm:
      topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "fairway.selectorLabels" . | nindent 10 }}
{{- end -}}

{{/* The ServiceAccount name of a component. */}}
{{- define "fairway.serviceAccount" -}}
fairway-{{ . }}
{{- end -}}

{{/*
The --zap-log-level of a logLevel value: controller-runtime's flag takes info, debug, error or a
verbosity above 0, and refuses 0, which is plain info.
*/}}
{{- define "fairway.zapLogLevel" -}}
{{- if eq (int .) 0 }}info{{ else }}{{ . }}{{ end -}}
{{- end -}}
