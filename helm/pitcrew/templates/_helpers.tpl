{{/* Names ---------------------------------------------------------------------- */}}

{{- define "pitcrew.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pitcrew.fullname" -}}
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

{{/* Cluster-scoped objects are shared by every namespace: the release namespace in
the name keeps two installs (staging, production) apart. */}}
{{- define "pitcrew.clusterName" -}}
{{- printf "%s-%s" (include "pitcrew.fullname" .) .Release.Namespace | trunc 253 | trimSuffix "-" -}}
{{- end -}}

{{- define "pitcrew.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "pitcrew.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pitcrew.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "pitcrew.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pitcrew.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pitcrew.labels" -}}
helm.sh/chart: {{ include "pitcrew.chart" . }}
{{ include "pitcrew.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: bot
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- /* The image: no default, since none is published. `make image` builds
localhost/pitcrew:<appVersion> on this machine, a name no cluster can pull; it must be
pushed to the user's registry and named in image.repository. */ -}}
{{- define "pitcrew.image" -}}
{{- $local := printf "localhost/pitcrew:%s" .Chart.AppVersion -}}
{{- $repository := required (printf "image.repository is required: no pitcrew image is published. Build it with `make image` (%s), push it to your registry (buildah push %s docker://REGISTRY/pitcrew:%s) and set image.repository=REGISTRY/pitcrew" $local $local .Chart.AppVersion) .Values.image.repository -}}
{{- if hasPrefix "localhost/" $repository -}}
{{- fail (printf "image.repository %s is the name `make image` gives the image on the machine that built it; a cluster cannot pull it. Push it (buildah push %s docker://REGISTRY/pitcrew:%s) and set image.repository=REGISTRY/pitcrew" $repository $local .Chart.AppVersion) -}}
{{- end -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* Paths inside the pod -------------------------------------------------------- */}}

{{- define "pitcrew.configDir" -}}/etc/pitcrew/config{{- end -}}
{{- define "pitcrew.configFile" -}}/etc/pitcrew/config/config.yaml{{- end -}}
{{- define "pitcrew.playbooksDir" -}}/etc/pitcrew/playbooks{{- end -}}
{{- define "pitcrew.secretsDir" -}}/var/run/secrets/pitcrew/slack{{- end -}}
{{- define "pitcrew.ingestTokenDir" -}}/var/run/secrets/pitcrew/ingest{{- end -}}
{{- define "pitcrew.alertmanagerTokenDir" -}}/var/run/secrets/pitcrew/alertmanager{{- end -}}
{{- define "pitcrew.cacheDir" -}}/var/cache/pitcrew{{- end -}}
{{- define "pitcrew.storePath" -}}
{{- printf "%s/pitcrew.db" (trimSuffix "/" .Values.persistence.mountPath) -}}
{{- end -}}

{{- define "pitcrew.storePasswordDir" -}}/var/run/secrets/pitcrew/store{{- end -}}

{{/* "true" when the store is PostgreSQL (store.url): replicas share it. */}}
{{- define "pitcrew.sharedStore" -}}
{{- if .Values.store.url -}}true{{- end -}}
{{- end -}}

{{- define "pitcrew.hasExtraPlaybooks" -}}
{{- if or .Values.extraPlaybooks .Values.extraPlaybooksConfigMap -}}true{{- end -}}
{{- end -}}

{{/* Slack ------------------------------------------------------------------------- */}}

{{- define "pitcrew.chatKind" -}}
{{- $chat := .Values.config.chat | default dict -}}
{{- $chat.kind | default "auto" -}}
{{- end -}}

{{- define "pitcrew.socketMode" -}}
{{- $chat := .Values.config.chat | default dict -}}
{{- $slack := $chat.slack | default dict -}}
{{- if hasKey $slack "socket_mode" -}}{{- ternary "true" "" (eq (toString $slack.socket_mode) "true") -}}{{- else -}}true{{- end -}}
{{- end -}}

{{/* The Secret keys the pod needs: the bot token, and the app token (Socket Mode)
or the signing secret (HTTP mode). Empty for the console chat. */}}
{{- define "pitcrew.slackKeys" -}}
{{- $kind := include "pitcrew.chatKind" . -}}
{{- $wanted := or (eq $kind "slack") (and (eq $kind "auto") (or .Values.slack.existingSecret .Values.slack.botToken)) -}}
{{- if $wanted -}}
SLACK_BOT_TOKEN
{{ if include "pitcrew.socketMode" . }}SLACK_APP_TOKEN{{ else }}SLACK_SIGNING_SECRET{{ end }}
{{- end -}}
{{- end -}}

{{- define "pitcrew.slackSecretName" -}}
{{- default (printf "%s-slack" (include "pitcrew.fullname" .)) .Values.slack.existingSecret -}}
{{- end -}}

{{- define "pitcrew.createSlackSecret" -}}
{{- if and (include "pitcrew.slackKeys" .) (not .Values.slack.existingSecret) -}}true{{- end -}}
{{- end -}}

{{/* Fails the render with what to set when the Slack chat lacks its tokens. */}}
{{- define "pitcrew.checkSlack" -}}
{{- $keys := include "pitcrew.slackKeys" . | splitList "\n" | compact -}}
{{- if and $keys (not .Values.slack.existingSecret) -}}
{{- $byKey := dict "SLACK_BOT_TOKEN" .Values.slack.botToken "SLACK_APP_TOKEN" .Values.slack.appToken "SLACK_SIGNING_SECRET" .Values.slack.signingSecret -}}
{{- $names := dict "SLACK_BOT_TOKEN" "slack.botToken" "SLACK_APP_TOKEN" "slack.appToken" "SLACK_SIGNING_SECRET" "slack.signingSecret" -}}
{{- $missing := list -}}
{{- range $keys -}}
{{- if not (get $byKey .) -}}{{- $missing = append $missing (get $names .) -}}{{- end -}}
{{- end -}}
{{- if $missing -}}
{{- fail (printf "the Slack chat needs its tokens: set %s, or slack.existingSecret (a Secret with keys %s), or config.chat.kind: console" (join " and " $missing) (join " and " $keys)) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pitcrew config file ----------------------------------------------------- */}}

{{/* values.config plus what the chart owns: the store (on the volume, or store.url, with
leader election on the release's Lease), the HTTP
port of the Service, in-cluster credentials and the watched namespaces, the
actions switch, the extra playbooks directory. Rendered as YAML for bot/settings.py. */}}
{{- define "pitcrew.config" -}}
{{- $config := deepCopy (.Values.config | default dict) -}}
{{- $store := mergeOverwrite (deepCopy ($config.store | default dict)) (dict "path" (include "pitcrew.storePath" .)) -}}
{{- if .Values.store.url -}}
{{- $_ := set $store "url" .Values.store.url -}}
{{- end -}}
{{- $_ := set $config "store" $store -}}
{{- if include "pitcrew.sharedStore" . -}}
{{- $elected := dict "enabled" true "namespace" .Release.Namespace "name" (include "pitcrew.fullname" .) -}}
{{- $election := mergeOverwrite (deepCopy ($config.leader_election | default dict)) $elected -}}
{{- $_ := set $config "leader_election" $election -}}
{{- end -}}
{{- $http := mergeOverwrite (dict "host" "0.0.0.0") (deepCopy ($config.http | default dict)) (dict "port" (int .Values.service.port)) -}}
{{- $_ := set $config "http" $http -}}
{{- $actions := mergeOverwrite (deepCopy ($config.actions | default dict)) (dict "enabled" .Values.actions.enabled) -}}
{{- $_ := set $config "actions" $actions -}}
{{- $sources := deepCopy ($config.sources | default dict) -}}
{{- $kube := mergeOverwrite (deepCopy ($sources.kubernetes | default dict)) (dict "in_cluster" true "namespaces" (.Values.watchNamespaces | default list)) -}}
{{- $_ := set $sources "kubernetes" $kube -}}
{{- $_ := set $config "sources" $sources -}}
{{- if include "pitcrew.hasExtraPlaybooks" . -}}
{{- $_ := set $config "playbooks" (dict "dirs" (list (include "pitcrew.playbooksDir" .))) -}}
{{- end -}}
{{- toYaml $config -}}
{{- end -}}

{{/* RBAC: exactly docs/rbac.md ------------------------------------------------- */}}

{{/* Namespaced reads: granted cluster-wide, or in each watched namespace. */}}
{{- define "pitcrew.rules.read" -}}
- apiGroups: [""]
  resources: [events]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch, get]
- apiGroups: [""]
  resources: [pods/log]
  verbs: [get]
- apiGroups: [""]
  resources: [resourcequotas]
  verbs: [list]
- apiGroups: [ray.io]
  resources: [rayjobs, rayclusters]
  verbs: [list, watch, get]
- apiGroups: [apps]
  resources: [replicasets, deployments, statefulsets]
  verbs: [get]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get]
{{- end -}}

{{/* Namespaced writes of the executors (only with actions.enabled). */}}
{{- define "pitcrew.rules.write" -}}
- apiGroups: [ray.io]
  resources: [rayjobs, rayclusters]
  verbs: [patch]
- apiGroups: [ray.io]
  resources: [rayjobs]
  verbs: [create, delete]
- apiGroups: [apps]
  resources: [deployments, statefulsets]
  verbs: [patch]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- end -}}

{{/* Cluster-scoped reads: nodes. */}}
{{- define "pitcrew.rules.cluster" -}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [list, watch, get]
{{- end -}}

{{/* Cluster-scoped writes of the executors (only with actions.enabled): cordon a node. */}}
{{- define "pitcrew.rules.clusterWrite" -}}
- apiGroups: [""]
  resources: [nodes]
  verbs: [patch]
{{- end -}}

{{/* The leader election's Lease, in the release namespace (the PostgreSQL store). */}}
{{- define "pitcrew.rules.lease" -}}
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end -}}
