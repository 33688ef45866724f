{{/* Names and labels shared by the templates. */}}

{{- define "gpuwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuwatch.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.labels" -}}
app.kubernetes.io/name: {{ include "gpuwatch.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
{{ include "gpuwatch.releaseLabels" . }}
{{- end -}}

{{- define "gpuwatch.releaseLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end -}}

{{/* The DaemonSet's selector: the helm test pod must not match it (other component). */}}
{{- define "gpuwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuwatch.name" . | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "gpuwatch.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpuwatch.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "gpuwatch.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Mount paths inside the container (the rendered config points at them). */}}
{{- define "gpuwatch.stateDir" -}}/var/lib/gpuwatch{{- end -}}
{{- define "gpuwatch.slackFile" -}}/etc/gpuwatch/slack/webhook-url{{- end -}}
{{- define "gpuwatch.awsFile" -}}/etc/gpuwatch/aws/credentials{{- end -}}
{{- define "gpuwatch.podResourcesDir" -}}/var/lib/kubelet/pod-resources{{- end -}}
{{- define "gpuwatch.podLogsDir" -}}/var/log/pods{{- end -}}

{{/*
The agent's config: the user's `config` map with the keys the chart owns set on top
(paths of its mounts and the listen port), rendered as TOML by Helm's toToml.
The [kubernetes] section (attribution) is written only when attribution is on; its keys
are those of gpuwatch.config's KubernetesConfig (enabled, pod_resources_socket,
pod_logs_dir, proc_root): the hook for the attribution collector.
*/}}
{{- define "gpuwatch.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $owned := dict "agent" (dict "state_dir" (include "gpuwatch.stateDir" .)) "exporter" (dict "listen" (printf "0.0.0.0:%d" (int .Values.port))) -}}
{{- if and .Values.slack.existingSecret (eq .Values.slack.mode "file") -}}
{{- $_ := set $owned "alerts" (dict "slack" (dict "webhook_url_file" (include "gpuwatch.slackFile" .))) -}}
{{- end -}}
{{- if .Values.attribution.enabled -}}
{{- $kube := dict "enabled" true "pod_resources_socket" (printf "%s/kubelet.sock" (include "gpuwatch.podResourcesDir" .)) "pod_logs_dir" (include "gpuwatch.podLogsDir" .) -}}
{{- if .Values.attribution.processes -}}
{{- $_ := set $kube "proc_root" "/proc" -}}
{{- end -}}
{{- $_ := set $owned "kubernetes" $kube -}}
{{- end -}}
{{- $merged := mustMergeOverwrite $config $owned -}}
{{- toToml $merged -}}
{{- end -}}

{{/* AWS credentials from an existing Secret: env keys, or a mounted shared credentials file. */}}
{{- define "gpuwatch.awsEnv" -}}
{{- if .Values.aws.existingSecret -}}
{{- if eq .Values.aws.mode "env" -}}
- name: AWS_ACCESS_KEY_ID
  valueFrom:
    secretKeyRef:
      name: {{ .Values.aws.existingSecret | quote }}
      key: {{ .Values.aws.accessKeyIdKey | quote }}
- name: AWS_SECRET_ACCESS_KEY
  valueFrom:
    secretKeyRef:
      name: {{ .Values.aws.existingSecret | quote }}
      key: {{ .Values.aws.secretAccessKeyKey | quote }}
{{- else -}}
- name: AWS_SHARED_CREDENTIALS_FILE
  value: {{ include "gpuwatch.awsFile" . | quote }}
{{- end -}}
{{- end -}}
{{- end -}}
