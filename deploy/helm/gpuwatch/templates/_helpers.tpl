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

{{/*
The agent container's securityContext: the values' securityContext, and with attribution
on runAsUser 0 / runAsNonRoot false under it (the values win where they set either). The
kubelet makes pod-resources/ root-owned, mode 0750, with a root-owned socket: only its
owner, uid 0, can reach it without CAP_DAC_OVERRIDE, so root with every capability
dropped connects and 65532 gets "permission denied".
*/}}
{{- define "gpuwatch.agentSecurityContext" -}}
{{- $context := deepCopy .Values.securityContext -}}
{{- if .Values.attribution.enabled -}}
{{- $context = merge $context (dict "runAsUser" 0 "runAsNonRoot" false) -}}
{{- end -}}
{{- toYaml $context -}}
{{- end -}}

{{/* The uid the agent runs as (the container's runAsUser, else the pod's). */}}
{{- define "gpuwatch.agentUser" -}}
{{- $context := include "gpuwatch.agentSecurityContext" . | fromYaml -}}
{{- if hasKey $context "runAsUser" -}}
{{- int $context.runAsUser -}}
{{- else -}}
{{- int .Values.podSecurityContext.runAsUser -}}
{{- end -}}
{{- end -}}

{{/*
Relabelings of the ServiceMonitor and PodMonitor. The operator gives every target the
agent's own namespace, service, pod, container and endpoint, and instance = the pod's
IP:port. With honorLabels the agent's series keep their own pod labels, but a series
without them (every GPU series, the pod cost counters' container) would take the agent
pod's, and a rollout would start new series. The node names the agent instead: `node`,
and `instance` set to it (one agent per node, stable across rollouts).
*/}}
{{- define "gpuwatch.relabelings" -}}
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: node
- sourceLabels: [__meta_kubernetes_pod_node_name]
  targetLabel: instance
{{- range list "namespace" "service" "pod" "container" "endpoint" }}
- targetLabel: {{ . }}
  replacement: ""
{{- end }}
{{- end -}}

{{/* Mount paths inside the container (the rendered config points at them). */}}
{{- define "gpuwatch.stateDir" -}}/var/lib/gpuwatch{{- end -}}
{{- define "gpuwatch.slackFile" -}}/etc/gpuwatch/slack/webhook-url{{- end -}}
{{- define "gpuwatch.awsFile" -}}/etc/gpuwatch/aws/credentials{{- end -}}
{{- define "gpuwatch.podResourcesDir" -}}/var/lib/kubelet/pod-resources{{- end -}}
{{- define "gpuwatch.podLogsDir" -}}/var/log/pods{{- end -}}
{{- define "gpuwatch.hostProcDir" -}}/host/proc{{- end -}}

{{/*
The agent's config: the user's `config` map with the keys the chart owns set on top
(paths of its mounts and the listen port), rendered as TOML by Helm's toToml.
The [kubernetes] section (attribution) is written only when attribution is on; its keys
are those of gpuwatch.config's KubernetesConfig (enabled, pod_resources_socket,
pod_logs_dir, and proc_root = the host's /proc mount where attribution.hostProc is set;
without it the agent's own /proc, where NVML's host PIDs are not).
*/}}
{{- define "gpuwatch.config" -}}
{{- $config := deepCopy .Values.config -}}
{{- $owned := dict "agent" (dict "state_dir" (include "gpuwatch.stateDir" .)) "exporter" (dict "listen" (printf "0.0.0.0:%d" (int .Values.port))) -}}
{{- if and .Values.slack.existingSecret (eq .Values.slack.mode "file") -}}
{{- $_ := set $owned "alerts" (dict "slack" (dict "webhook_url_file" (include "gpuwatch.slackFile" .))) -}}
{{- end -}}
{{- if .Values.attribution.enabled -}}
{{- $kube := dict "enabled" true "pod_resources_socket" (printf "%s/kubelet.sock" (include "gpuwatch.podResourcesDir" .)) "pod_logs_dir" (include "gpuwatch.podLogsDir" .) -}}
{{- if .Values.attribution.hostProc -}}
{{- $_ := set $kube "proc_root" (include "gpuwatch.hostProcDir" .) -}}
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
