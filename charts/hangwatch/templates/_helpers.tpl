{{/*
Helpers of the hangwatch chart, named hangwatch.<component>.<thing>.
Components: chart (names and labels shared by all), operator, sidecar, webhook, peering,
alerts (the one alert source feeding the PrometheusRule and the Grafana alert rules).
*/}}

{{/* Chart name, overridable with nameOverride. */}}
{{- define "hangwatch.chart.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* "<release>-<chart>" (or just the release when it already contains the chart name). */}}
{{- define "hangwatch.chart.fullname" -}}
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

{{/* Labels on every object. app.kubernetes.io/name is also what the webhook test expects. */}}
{{- define "hangwatch.chart.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "hangwatch.chart.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hangwatch
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Name of the operator's Deployment, Service and RBAC objects. */}}
{{- define "hangwatch.operator.fullname" -}}
{{- printf "%s-operator" (include "hangwatch.chart.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hangwatch.operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hangwatch.chart.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "hangwatch.operator.labels" -}}
{{ include "hangwatch.chart.labels" . }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "hangwatch.operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hangwatch.operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "hangwatch.operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* "all" or the list of watched namespaces, for RBAC and args. */}}
{{- define "hangwatch.operator.clusterWide" -}}
{{- if empty .Values.operator.watch.namespaces -}}true{{- end -}}
{{- end -}}

{{/* The operator's container arguments (`hangwatch operator ...`). */}}
{{/* "true" when kopf peering is on: asked for, and not replaced by sharding. */}}
{{- define "hangwatch.operator.peering" -}}
{{- if and .Values.operator.peering.enabled (not .Values.operator.sharding.enabled) }}true{{- end }}
{{- end -}}

{{- define "hangwatch.operator.args" -}}
- operator
{{- if include "hangwatch.operator.clusterWide" . }}
- --all-namespaces
{{- else }}
{{- range .Values.operator.watch.namespaces }}
- --namespace
- {{ . | quote }}
{{- end }}
{{- end }}
{{- if include "hangwatch.operator.peering" . }}
- --peering
- {{ .Values.operator.peering.name | quote }}
{{- else }}
- --standalone
{{- end }}
- --metrics-port
- {{ .Values.operator.metricsPort | quote }}
- --liveness
- {{ printf "http://0.0.0.0:%d/healthz" (int .Values.operator.healthPort) | quote }}
{{- if .Values.operator.dryRun }}
- --dry-run
{{- end }}
{{- end -}}

{{/* RBAC rules for the namespaces the operator works in (cluster-wide or per Role). */}}
{{- define "hangwatch.operator.workloadRules" -}}
# Policies: watched by kopf, which records its progress in annotations (patch).
- apiGroups: [hangwatch.dev]
  resources: [producerhealthpolicies]
  verbs: [get, list, watch, patch]
# Policy status: counts by verdict, conditions, recent actions.
- apiGroups: [hangwatch.dev]
  resources: [producerhealthpolicies/status]
  verbs: [get, patch]
# Spark pods: watched to correlate verdicts; deleted by the `restart` action.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete]
# Events on policies and pods (decisions, suppressions, actions).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
{{- end -}}

{{- define "hangwatch.sidecar.image" -}}
{{- printf "%s:%s" .Values.sidecar.image.repository (default .Chart.AppVersion .Values.sidecar.image.tag) -}}
{{- end -}}

{{/* The Service the API server calls for admission (and Prometheus scrapes). */}}
{{- define "hangwatch.webhook.serviceName" -}}
{{- include "hangwatch.operator.fullname" . -}}
{{- end -}}

{{- define "hangwatch.webhook.secretName" -}}
{{- if .Values.webhook.existingSecret.name -}}
{{- .Values.webhook.existingSecret.name -}}
{{- else -}}
{{- printf "%s-webhook-tls" (include "hangwatch.chart.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/*
Where the webhook's serving certificate comes from: certManager, existingSecret,
provided (PEM values) or generated (by the chart; the default). At most one may be set.
*/}}
{{- define "hangwatch.webhook.tlsSource" -}}
{{- $sources := list -}}
{{- if .Values.webhook.certManager.enabled -}}{{- $sources = append $sources "certManager" -}}{{- end -}}
{{- if .Values.webhook.existingSecret.name -}}{{- $sources = append $sources "existingSecret" -}}{{- end -}}
{{- $provided := .Values.webhook.providedCert -}}
{{- if or $provided.caCert $provided.tlsCert $provided.tlsKey -}}
{{- if not (and $provided.caCert $provided.tlsCert $provided.tlsKey) -}}
{{- fail "webhook.providedCert needs caCert, tlsCert and tlsKey (PEM) together" -}}
{{- end -}}
{{- $sources = append $sources "provided" -}}
{{- end -}}
{{- if gt (len $sources) 1 -}}
{{- fail (printf "webhook TLS: choose one of certManager.enabled, existingSecret.name and providedCert, not %s" (join " and " $sources)) -}}
{{- end -}}
{{- if $sources -}}{{- first $sources -}}{{- else -}}generated{{- end -}}
{{- end -}}

{{- define "hangwatch.webhook.certificateName" -}}
{{- printf "%s-webhook" (include "hangwatch.chart.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hangwatch.webhook.configurationName" -}}
{{- printf "%s-sidecar-injector" (include "hangwatch.chart.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* DNS names of the webhook Service, for the serving certificate. */}}
{{- define "hangwatch.webhook.dnsNames" -}}
{{- $svc := include "hangwatch.webhook.serviceName" . -}}
{{- $ns := .Release.Namespace -}}
{{- toYaml (list $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns)) -}}
{{- end -}}

{{/*
The alerts of files/alerts.yaml after the values are applied (monitoring.alerts:
disabled, overrides, extraLabels, runbookBaseUrl), as YAML `{groups: [{name, interval,
alerts: [{name, uid, expr, for, labels, annotations}]}]}`. Alerts whose
`requires` toggle (monitoring.<requires>.enabled) is off are left out. The PrometheusRule and the
Grafana alert rules both render from this one structure, so they cannot drift.
*/}}
{{- define "hangwatch.alerts.normalized" -}}
{{- $cfg := .Values.monitoring.alerts -}}
{{- $source := .Files.Get "files/alerts.yaml" | fromYaml -}}
{{- $groups := list -}}
{{- range $group := $source.groups -}}
{{- $alerts := list -}}
{{- range $alert := $group.alerts -}}
{{- $required := true -}}
{{- if $alert.requires -}}
{{- $required = (index $.Values.monitoring $alert.requires).enabled -}}
{{- end -}}
{{- if and $required (not (has $alert.name $cfg.disabled)) -}}
{{- $override := get $cfg.overrides $alert.name | default dict -}}
{{- $labels := merge (dict "severity" ($override.severity | default $alert.severity)) (dict "component" $group.component) $cfg.extraLabels -}}
{{- $annotations := dict "summary" $alert.summary "description" $alert.description "runbook_url" (printf "%s#%s" $cfg.runbookBaseUrl (lower $alert.name)) -}}
{{- $alerts = append $alerts (dict "name" $alert.name "uid" (kebabcase $alert.name) "expr" $alert.expr "for" ($override.for | default $alert.for) "labels" $labels "annotations" $annotations) -}}
{{- end -}}
{{- end -}}
{{- if $alerts -}}
{{- $groups = append $groups (dict "name" $group.name "interval" $group.interval "alerts" $alerts) -}}
{{- end -}}
{{- end -}}
{{- toYaml (dict "groups" $groups) -}}
{{- end -}}
