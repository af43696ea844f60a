{{/*
The chart name, overridable with nameOverride.
*/}}
{{- define "pvguard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The fully qualified name of every object the chart creates: the Service, the webhook
configurations, the RBAC objects and the certificate Secret are all named after it, and the
self-managed certificate code finds them by it. Kept to 52 characters so that the longest
derived name ("<fullname>-selfsigned") stays a valid DNS label.
*/}}
{{- define "pvguard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pvguard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels: stable across upgrades, used by the Deployment, Service, PodDisruptionBudget,
anti-affinity and NetworkPolicy.
*/}}
{{- define "pvguard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pvguard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "pvguard.labels" -}}
helm.sh/chart: {{ include "pvguard.chart" . }}
{{ include "pvguard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: pvguard
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pvguard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pvguard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
"true" when the live audit runs: --audit-interval is a Go duration (values.schema.json checks
its form) and any zero duration ("0", "0s", "0m0s") turns it off.
*/}}
{{- define "pvguard.auditEnabled" -}}
{{- if regexMatch "[1-9]" (toString .Values.audit.interval) }}true{{ else }}false{{ end }}
{{- end }}

{{/*
"true" when pvguard runs leader-elected components and so holds a Lease: serve.go elects only
when the binder (--binder not off), the report writer (audit on), the certificate rotator
(--cert-secret) or the writer of the admission policies' parameters (--admission-policy-params)
runs.
*/}}
{{- define "pvguard.leaderElection" -}}
{{- if or (ne .Values.binder.mode "off") (eq (include "pvguard.auditEnabled" .) "true") (not .Values.certManager.enabled) .Values.admissionPolicies.enabled }}true{{ else }}false{{ end }}
{{- end }}

{{/*
"true" when pvguard manages its own CA and serving certificate (certManager.enabled=false).
*/}}
{{- define "pvguard.selfManagedCerts" -}}
{{- if .Values.certManager.enabled }}false{{ else }}true{{ end }}
{{- end }}

{{- define "pvguard.tlsSecretName" -}}
{{ include "pvguard.fullname" . }}-tls
{{- end }}

{{- define "pvguard.leaseName" -}}
{{ include "pvguard.fullname" . }}-leader
{{- end }}

{{/*
The Service's DNS names, as the serving certificate must list them.
*/}}
{{- define "pvguard.dnsNames" -}}
{{- $svc := include "pvguard.fullname" . -}}
- {{ $svc }}
- {{ $svc }}.{{ .Release.Namespace }}
- {{ $svc }}.{{ .Release.Namespace }}.svc
- {{ $svc }}.{{ .Release.Namespace }}.svc.cluster.local
{{- end }}

{{/*
The webhook client configuration for a path: the Service on port 443. With cert-manager the
cainjector fills caBundle; with self-managed certificates pvguard patches it in.
*/}}
{{- define "pvguard.clientConfig" -}}
clientConfig:
  service:
    namespace: {{ .root.Release.Namespace }}
    name: {{ include "pvguard.fullname" .root }}
    path: {{ .path }}
    port: 443
{{- end }}

{{/*
Claims in pvguard's own namespace are never sent to pvguard, so a broken pvguard can always be
repaired; webhook.namespaceSelector adds to this.
*/}}
{{- define "pvguard.claimNamespaceSelector" -}}
namespaceSelector:
  {{- with .Values.webhook.namespaceSelector.matchLabels }}
  matchLabels:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values:
        - {{ .Release.Namespace }}
    {{- with .Values.webhook.namespaceSelector.matchExpressions }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}

{{/*
Who is a component: the identities webhook.components.identities lists (by default
kube-controller-manager, kube-scheduler, the nodes and kube-system's ServiceAccounts, where
kube-controller-manager's controllers run with --use-service-account-credentials), plus pvguard's
own ServiceAccount when its binder binds (binder.mode active: it replaces kube-controller-manager's
binder). Their writes go to the components' webhooks, whose failure policy is
webhook.componentsFailurePolicy (default Ignore: the cluster's storage never waits on pvguard);
everyone else's (people, tenants' ServiceAccounts, any tool not listed) go to the people's webhooks,
with webhook.failurePolicy (default Fail). This is not an identity the rules trust: pvguard judges a
component's write by the state it leaves, as anyone's; only what happens while pvguard does not
answer differs. docs/reliability.md says what each choice costs.

The chart refuses a list that matches every ServiceAccount (a namespace "*", the groups
system:serviceaccounts or system:authenticated) unless webhook.components.allowAllServiceAccounts
says so: then any tenant's ServiceAccount fails open, and a tenant who floods or hangs pvguard
makes its own writes pass unjudged.
*/}}
{{- define "pvguard.isComponent" -}}
{{- $c := .Values.webhook.components -}}
{{- $users := list -}}
{{- $groups := list -}}
{{- $prefixes := list -}}
{{- $all := list -}}
{{- range $c.identities -}}
{{- if hasKey . "user" -}}
{{- $users = append $users .user -}}
{{- else if hasKey . "serviceAccount" -}}
{{- $users = append $users (printf "system:serviceaccount:%s" (replace "/" ":" .serviceAccount)) -}}
{{- else if hasKey . "group" -}}
{{- if has .group (list "system:serviceaccounts" "system:authenticated") -}}
{{- $all = append $all (printf "group %s" .group) -}}
{{- end -}}
{{- $groups = append $groups .group -}}
{{- else if hasKey . "namespace" -}}
{{- if eq .namespace "*" -}}
{{- $all = append $all `namespace "*"` -}}
{{- $prefixes = append $prefixes "system:serviceaccount:" -}}
{{- else if hasSuffix "*" .namespace -}}
{{- $prefixes = append $prefixes (printf "system:serviceaccount:%s" (trimSuffix "*" .namespace)) -}}
{{- else -}}
{{- $prefixes = append $prefixes (printf "system:serviceaccount:%s:" .namespace) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $all (not $c.allowAllServiceAccounts) -}}
{{- fail (printf "webhook.components.identities matches every ServiceAccount (%s): every tenant's ServiceAccount would be a component, whose writes pass unjudged while pvguard does not answer. List the storage stack's namespaces and ServiceAccounts instead, or set webhook.components.allowAllServiceAccounts=true to accept that (docs/reliability.md)" (join ", " $all)) -}}
{{- end -}}
{{- if eq .Values.binder.mode "active" -}}
{{- $users = append $users (printf "system:serviceaccount:%s:%s" .Release.Namespace (include "pvguard.serviceAccountName" .)) -}}
{{- end -}}
{{- $terms := list -}}
{{- if $users -}}
{{- $terms = append $terms (printf "request.userInfo.username in [%s]" (include "pvguard.celStrings" (uniq $users))) -}}
{{- end -}}
{{- range uniq $prefixes -}}
{{- $terms = append $terms (printf "request.userInfo.username.startsWith(%s)" (include "pvguard.celStrings" (list .))) -}}
{{- end -}}
{{- if $groups -}}
{{- $terms = append $terms (printf "(has(request.userInfo.groups) && request.userInfo.groups.exists(g, g in [%s]))" (include "pvguard.celStrings" (uniq $groups))) -}}
{{- end -}}
{{- if $terms }}{{ join " || " $terms }}{{ else }}false{{ end -}}
{{- end }}

{{/*
A list of strings as CEL string literals, comma separated: single-quoted, with backslashes and
single quotes escaped, so that no identity can end the literal.
*/}}
{{- define "pvguard.celStrings" -}}
{{- $out := list -}}
{{- range . -}}
{{- $out = append $out (printf "'%s'" (. | replace "\\" "\\\\" | replace "'" "\\'")) -}}
{{- end -}}
{{- join ", " $out -}}
{{- end }}

{{/*
One webhook rendered twice, for people and for components (pvguard.isComponent): .root and
.registration, one of files/webhooks.json's (webhook.Registration: name, path, rules, claims for
the claims' namespaceSelector, volumes for the installer's webhook.matchConditions, the
registration's matchConditions, mutating for reinvocationPolicy).
*/}}
{{- define "pvguard.webhookPair" -}}
{{- $root := .root -}}
{{- $r := .registration -}}
{{- range $who := list "people" "components" }}
{{- $conditions := list (dict "name" (ternary "not-a-component" "a-component" (eq $who "people")) "expression" (ternary (printf "!(%s)" (include "pvguard.isComponent" $root)) (include "pvguard.isComponent" $root) (eq $who "people"))) -}}
{{- if get $r "volumes" }}{{ $conditions = concat $conditions $root.Values.webhook.matchConditions }}{{ end -}}
{{- if get $r "matchConditions" }}{{ $conditions = concat $conditions (get $r "matchConditions") }}{{ end }}
- name: {{ ternary (printf "%s.pvguard.io" $r.name) (printf "%s-components.pvguard.io" $r.name) (eq $who "people") }}
  {{- include "pvguard.clientConfig" (dict "root" $root "path" $r.path) | nindent 2 }}
  rules:
    {{- toYaml $r.rules | nindent 4 }}
  {{- if get $r "claims" }}
  {{- include "pvguard.claimNamespaceSelector" $root | nindent 2 }}
  {{- end }}
  matchConditions:
    {{- toYaml $conditions | nindent 4 }}
  failurePolicy: {{ ternary $root.Values.webhook.failurePolicy $root.Values.webhook.componentsFailurePolicy (eq $who "people") }}
  matchPolicy: Equivalent
  sideEffects: None
  timeoutSeconds: {{ $root.Values.webhook.timeoutSeconds }}
  admissionReviewVersions:
    - v1
  {{- if get $r "mutating" }}
  reinvocationPolicy: Never
  {{- end }}
{{- end }}
{{- end }}

{{- define "pvguard.webhookAnnotations" -}}
{{- if .Values.certManager.enabled }}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/{{ include "pvguard.fullname" . }}-serving
{{- end }}
{{- end }}

{{/*
The policy config pvguard reads from --config. With binder.mode=active, pvguard's own service
account is added to controllers.serviceAccounts (docs/binder.md), so its binder-annotation writes
are not reported by PVG013.
*/}}
{{- define "pvguard.policy" -}}
{{- $policy := deepCopy .Values.policy -}}
{{- if eq .Values.binder.mode "active" -}}
{{- $self := printf "%s/%s" .Release.Namespace (include "pvguard.serviceAccountName" .) -}}
{{- $controllers := get $policy "controllers" | default dict -}}
{{- $sas := get $controllers "serviceAccounts" | default list -}}
{{- if not (has $self $sas) -}}
{{- $_ := set $controllers "serviceAccounts" (append $sas $self) -}}
{{- end -}}
{{- $_ := set $policy "controllers" $controllers -}}
{{- end -}}
{{- if $policy }}{{ toYaml $policy }}{{ else }}{}{{ end }}
{{- end }}
