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

{{/* The files berth reads its upload secret and token key from when they come from Secrets. */}}
{{- define "berth.httpSecretFile" -}}
{{- printf "/etc/berth-secrets/http/%s" .Values.httpSecret.key }}
{{- end }}

{{- define "berth.tokenKeyFile" -}}
{{- printf "/etc/berth-secrets/token/%s" .Values.tokenKey.key }}
{{- end }}

{{- define "berth.provenanceKeyFile" -}}
{{- printf "/etc/berth-secrets/provenance/%s" .Values.provenanceKey.key }}
{{- end }}

{{/* "true" when config has an auth section. */}}
{{- define "berth.auth" -}}
{{- if hasKey (default (dict) .Values.config) "auth" }}true{{ end }}
{{- end }}

{{/* "true" when a namespace of config lists sources (namespaces[].sources), which berth tracks,
builds and signs with its provenance key. */}}
{{- define "berth.sources" -}}
{{- range (dig "namespaces" list (default (dict) .Values.config)) }}
{{- if and (kindIs "map" .) .sources }}true{{ end }}
{{- end }}
{{- end }}

{{/* "true" when berth serves HTTPS: tls.enabled, or a certificate set in config.http.tls. */}}
{{- define "berth.tls" -}}
{{- if or .Values.tls.enabled (dig "http" "tls" "certificate" "" (default (dict) .Values.config)) }}true{{ end }}
{{- end }}

{{/* The name of berth's port, in the container and the Service, which is also its scheme. */}}
{{- define "berth.portName" -}}
{{- ternary "https" "http" (not (empty (include "berth.tls" .))) }}
{{- end }}

{{/* "true" when /data is a PersistentVolumeClaim: persistence on and one replica. */}}
{{- define "berth.persistent" -}}
{{- if and .Values.persistence.enabled (le (int .Values.replicas) 1) }}true{{ end }}
{{- end }}

{{/* "true" when pods are replaced by a rolling update, old and new side by side: the catalog in
PostgreSQL, and no volume that one pod at a time holds. Otherwise Recreate. */}}
{{- define "berth.rolling" -}}
{{- if and .Values.database.existingSecret (not (include "berth.persistent" .)) }}true{{ end }}
{{- end }}

{{/* The URL nodes and clients pull from: config.catalog.publicURL, else the ingress's first host. */}}
{{- define "berth.publicURL" -}}
{{- $set := dig "catalog" "publicURL" "" (default (dict) .Values.config) }}
{{- if $set }}
{{- $set }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- printf "%s://%s" (ternary "https" "http" (not (empty .Values.ingress.tls))) (first .Values.ingress.hosts) }}
{{- end }}
{{- end }}

{{/* Fails the rendering on values that cannot work. */}}
{{- define "berth.validate" -}}
{{- $config := default (dict) .Values.config }}
{{- if not (include "berth.publicURL" .) }}
{{- fail "config.catalog.publicURL is required: set it to the URL cluster nodes and clients pull from (e.g. https://berth.example.com; OLM catalog images name their bundle images on its host, and nodes cannot pull from localhost:5000), or enable the ingress with a host (ingress.enabled, ingress.hosts), from which the chart derives it. To try berth through kubectl port-forward only: --set config.catalog.publicURL=http://localhost:5000" }}
{{- end }}
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
{{- if include "berth.rolling" . }}
{{- if not .Values.httpSecret.existingSecret }}
{{- fail "pods that run side by side (replicas > 1, or one replica on PostgreSQL without a volume, replaced by a rolling update) need one upload secret shared by all: set httpSecret.existingSecret to a Secret holding it (kubectl create secret generic berth-http-secret --from-literal=http-secret=\"$(openssl rand -hex 32)\"; upgrading from chart 0.1.0, keep the Secret it made: docs/deploy.md#upgrading)" }}
{{- end }}
{{- if and (include "berth.auth" .) (not .Values.tokenKey.existingSecret) }}
{{- fail "pods that run side by side (replicas > 1, or one replica on PostgreSQL without a volume, replaced by a rolling update) with auth need one token key shared by all: set tokenKey.existingSecret to a Secret holding an ECDSA P-256 key in PEM (openssl ecparam -name prime256v1 -genkey -noout -out token-key.pem; kubectl create secret generic berth-token-key --from-file=token-key.pem; upgrading from chart 0.1.0, keep the Secret it made: docs/deploy.md#upgrading)" }}
{{- end }}
{{- end }}
{{- if and .Values.provenanceKey.existingSecret (dig "sources" "signingKey" "" $config) }}
{{- fail "config.sources.signingKey and provenanceKey.existingSecret both name berth's provenance key: with provenanceKey.existingSecret the chart sets sources.signingKey to that Secret's key, mounted under /etc/berth-secrets/provenance; remove config.sources.signingKey, or unset provenanceKey.existingSecret to keep your own file" }}
{{- end }}
{{- if and .Values.provenanceKey.passwordKey (not .Values.provenanceKey.existingSecret) }}
{{- fail "provenanceKey.passwordKey names a key of the Secret provenanceKey.existingSecret, which is not set: set provenanceKey.existingSecret to the Secret holding the provenance key and its password, or unset provenanceKey.passwordKey" }}
{{- end }}
{{- if and (include "berth.sources" .) (not .Values.provenanceKey.existingSecret) }}
{{- $howto := "(export COSIGN_PASSWORD=\"$(openssl rand -hex 32)\"; cosign generate-key-pair --output-key-prefix provenance; kubectl create secret generic berth-provenance-key --from-file=provenance.key --from-literal=password=\"$COSIGN_PASSWORD\"; then --set provenanceKey.existingSecret=berth-provenance-key,provenanceKey.passwordKey=password; docs/deploy.md#package-sources)" }}
{{- if include "berth.rolling" . }}
{{- fail (printf "pods that run side by side (replicas > 1, or one replica on PostgreSQL without a volume, replaced by a rolling update) with config.namespaces[].sources need one provenance key shared by all, so that every version built from a source verifies with one public key: set provenanceKey.existingSecret to a Secret holding a cosign private key %s" $howto) }}
{{- else if and .Values.database.existingSecret (not (dig "sources" "signingKey" "" $config)) }}
{{- fail (printf "config.namespaces[].sources with the catalog in PostgreSQL (database.existingSecret) need sources.signingKey, which berth requires then: set provenanceKey.existingSecret to a Secret holding a cosign private key %s, or config.sources.signingKey: /data/provenance.key to keep the key berth creates on the volume" $howto) }}
{{- end }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- if not .Values.tls.secretName }}
{{- fail "tls.enabled needs tls.secretName: a kubernetes.io/tls Secret holding tls.crt and tls.key (kubectl create secret tls berth-tls --cert=... --key=..., or a cert-manager Certificate)" }}
{{- end }}
{{- end }}
{{- if and (include "berth.tls" .) (has "require" (list (toString .Values.tls.clientAuth) (toString (dig "http" "tls" "clientAuth" "" (default (dict) .Values.config))))) }}
{{- fail "tls.clientAuth require: the kubelet's probes present no client certificate, so no pod would become ready; use verify-if-given (the default) and let auth rules decide who may do what" }}
{{- end }}
{{- end }}

{{/* berth's configuration file: .Values.config with the keys the chart owns set. */}}
{{- define "berth.config" -}}
{{- $config := deepCopy (default (dict) .Values.config) }}
{{- $owned := dict "addr" ":5000" "data" "/data" }}
{{- if .Values.httpSecret.existingSecret }}
{{- $_ := set $owned "registry" (dict "httpSecretFile" (include "berth.httpSecretFile" .)) }}
{{- end }}
{{- if .Values.s3.existingSecret }}
{{- $_ := set $owned "storage" (dict "s3" (dict "secretKeyFile" (printf "/etc/berth-secrets/s3/%s" .Values.s3.secretKeyKey))) }}
{{- end }}
{{- with include "berth.publicURL" . }}
{{- $_ := set $owned "catalog" (dict "publicURL" .) }}
{{- end }}
{{- with .Values.trustedProxies }}
{{- $_ := set $owned "trustedProxies" . }}
{{- end }}
{{- if and (include "berth.auth" .) .Values.tokenKey.existingSecret }}
{{- $_ := set $owned "auth" (dict "keyFile" (include "berth.tokenKeyFile" .)) }}
{{- end }}
{{- if .Values.provenanceKey.existingSecret }}
{{- $_ := set $owned "sources" (dict "signingKey" (include "berth.provenanceKeyFile" .)) }}
{{- end }}
{{- if .Values.tls.enabled }}
{{- $tls := dict "certificate" "/etc/berth-secrets/tls/tls.crt" "key" "/etc/berth-secrets/tls/tls.key" }}
{{- with .Values.tls.minVersion }}
{{- $_ := set $tls "minVersion" (toString .) }}
{{- end }}
{{- if .Values.tls.clientCA.secretName }}
{{- $_ := set $tls "clientCA" (printf "/etc/berth-secrets/client-ca/%s" .Values.tls.clientCA.key) }}
{{- end }}
{{- with .Values.tls.clientAuth }}
{{- $_ := set $tls "clientAuth" . }}
{{- end }}
{{- $_ := set $owned "http" (dict "tls" $tls) }}
{{- end }}
{{- toYaml (mustMergeOverwrite $config $owned) }}
{{- end }}
