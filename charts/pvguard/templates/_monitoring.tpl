{{/*
PromQL label matchers shared by the PrometheusRule and the Grafana dashboard.

pvguard.promSelector: pvguard's own series, by the job and namespace labels the ServiceMonitor
gives them (the Prometheus Operator names the job after the Service, <fullname>, and the
namespace is the release namespace).
*/}}
{{- define "pvguard.promSelector" -}}
job="{{ include "pvguard.fullname" . }}", namespace="{{ .Release.Namespace }}"
{{- end }}

{{/*
pvguard.webhookNameMatcher: the apiserver's admission webhook series for pvguard's webhooks
(their label "name" is the webhook's name in templates/webhooks.yaml; a chart test checks that
this list is exactly the names rendered there), plus metrics.prometheusRule.apiserverSelector.
*/}}
{{- define "pvguard.webhookNameMatcher" -}}
name=~"validate-pv\\.pvguard\\.io|validate-pv-components\\.pvguard\\.io|validate-pvc\\.pvguard\\.io|validate-pvc-components\\.pvguard\\.io|validate-sc\\.pvguard\\.io|validate-sc-components\\.pvguard\\.io|mutate-pv\\.pvguard\\.io|mutate-pv-components\\.pvguard\\.io|mutate-pvc\\.pvguard\\.io|mutate-pvc-components\\.pvguard\\.io"
{{- with .Values.metrics.prometheusRule.apiserverSelector }}, {{ . }}{{ end }}
{{- end }}
