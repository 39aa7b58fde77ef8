{{/* The chart's name, and the release's resources' name (at most 63 characters). */}}
{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "berth.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "berth.selectorLabels" -}}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "berth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "berth.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "berth.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "berth.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "berth.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret holding the upload secret, and the file berth reads it from. */}}
{{- define "berth.httpSecretName" -}}
{{- default (printf "%s-http-secret" (include "berth.fullname" .)) .Values.httpSecret.existingSecret }}
{{- end }}

{{- define "berth.httpSecretFile" -}}
{{- printf "/etc/berth-secrets/http/%s" .Values.httpSecret.key }}
{{- end }}

{{/* "true" when config has an auth section. */}}
{{- define "berth.auth" -}}
{{- if hasKey (default (dict) .Values.config) "auth" }}true{{ end }}
{{- end }}

{{- define "berth.tokenKeyName" -}}
{{- default (printf "%s-token-key" (include "berth.fullname" .)) .Values.tokenKey.existingSecret }}
{{- end }}

{{- define "berth.tokenKeyFile" -}}
{{- printf "/etc/berth-secrets/token/%s" .Values.tokenKey.key }}
{{- end }}

{{/* "true" when /data is a PersistentVolumeClaim: persistence on and one replica. */}}
{{- define "berth.persistent" -}}
{{- if and .Values.persistence.enabled (le (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{/* Fails the rendering on values that cannot work. */}}
{{- define "berth.validate" -}}
{{- $config := default (dict) .Values.config }}
{{- if regexMatch "^postgres(ql)?://" (toString (dig "catalog" "database" "" $config)) }}
{{- fail "config.catalog.database: a PostgreSQL URL holds a password and does not belong in a ConfigMap; put it in a Secret and name it in database.existingSecret" }}
{{- end }}
{{- if gt (int .Values.replicas) 1 }}
{{- if not .Values.database.existingSecret }}
{{- fail "replicas > 1 needs the catalog in PostgreSQL: set database.existingSecret to a Secret holding its postgres:// URL (the SQLite catalog and filesystem storage serve a single replica only)" }}
{{- end }}
{{- if has (toString (dig "storage" "driver" "" $config)) (list "" "filesystem" "inmemory") }}
{{- fail "replicas > 1 needs shared object storage: set config.storage.driver to s3, gcs or azure (the SQLite catalog and filesystem storage serve a single replica only)" }}
{{- end }}
{{- end }}
{{- end }}

{{/* berth's configuration file: .Values.config with the keys the chart owns set. */}}
{{- define "berth.config" -}}
{{- $config := deepCopy (default (dict) .Values.config) }}
{{- $owned := dict "addr" ":5000" "data" "/data" "registry" (dict "httpSecretFile" (include "berth.httpSecretFile" .)) }}
{{- if .Values.s3.existingSecret }}
{{- $_ := set $owned "storage" (dict "s3" (dict "secretKeyFile" (printf "/etc/berth-secrets/s3/%s" .Values.s3.secretKeyKey))) }}
{{- end }}
{{- if and .Values.ingress.enabled .Values.ingress.hosts (not (dig "catalog" "publicURL" "" $config)) }}
{{- $scheme := ternary "https" "http" (not (empty .Values.ingress.tls)) }}
{{- $_ := set $owned "catalog" (dict "publicURL" (printf "%s://%s" $scheme (first .Values.ingress.hosts))) }}
{{- end }}
{{- with .Values.trustedProxies }}
{{- $_ := set $owned "trustedProxies" . }}
{{- end }}
{{- if include "berth.auth" . }}
{{- $_ := set $owned "auth" (dict "keyFile" (include "berth.tokenKeyFile" .)) }}
{{- end }}
{{- toYaml (mustMergeOverwrite $config $owned) }}
{{- end }}
