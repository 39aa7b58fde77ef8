package deploy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/berth-registry/berth/internal/testenv"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/sources"
)

// chart is the Helm chart's folder, scaleOutValues the values of several
// replicas on PostgreSQL and S3 behind an ingress, scraped by Prometheus, and
// tlsValues those of one replica serving HTTPS with auth behind a
// NetworkPolicy.
const (
	chart          = "helm/berth"
	scaleOutValues = "helm/berth/ci/scale-out-values.yaml"
	tlsValues      = "helm/berth/ci/tls-values.yaml"
)

// minimal are the fewest values the chart renders with: the public URL,
// which it requires unless an ingress host gives it.
var minimal = []string{"--set", "config.catalog.publicURL=https://berth.example.com"}

// sourcesSet lists a package source, which berth tracks, builds and signs
// with its provenance key; withSources are its helm template arguments.
const sourcesSet = "config.namespaces[0].name=operators,config.namespaces[0].sources[0].package=kafka," +
	"config.namespaces[0].sources[0].kind=git,config.namespaces[0].sources[0].url=https://github.com/example/kafka-operator," +
	"config.namespaces[0].sources[0].ref=v*"

var withSources = []string{"--set", sourcesSet}

// helmPath is the helm pinned in go.mod: `go tool -n helm` builds it once
// and prints its path.
var helmPath = sync.OnceValues(func() (string, error) {
	out, err := exec.Command("go", "tool", "-n", "helm").Output()
	return strings.TrimSpace(string(out)), err
})

// helm runs the pinned helm with args and returns its standard output; the
// test is skipped without helm, and fails in CI.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	bin, err := helmPath()
	if err != nil {
		if testenv.CI() {
			t.Fatalf("helm is required in CI (go tool -n helm): %v", err)
		}
		t.Skipf("helm not available (go tool -n helm): %v", err)
	}
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

// render renders the chart as release berth with the helm template args.
func render(t *testing.T, args ...string) []object {
	t.Helper()
	out, err := helm(t, append([]string{"template", "berth", chart}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return parseObjects(t, out)
}

// chartImage is the image the chart runs by default: its repository and the
// chart's appVersion.
func chartImage(t *testing.T) string {
	t.Helper()
	var c struct {
		AppVersion string `yaml:"appVersion"`
	}
	var v struct {
		Image struct {
			Repository string `yaml:"repository"`
			Tag        string `yaml:"tag"`
		} `yaml:"image"`
	}
	for file, into := range map[string]any{"Chart.yaml": &c, "values.yaml": &v} {
		b, err := os.ReadFile(filepath.Join(chart, file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if c.AppVersion == "" || v.Image.Repository == "" || v.Image.Tag != "" {
		t.Fatalf("want appVersion and image.repository set and image.tag empty, got %q, %q, %q", c.AppVersion, v.Image.Repository, v.Image.Tag)
	}
	return v.Image.Repository + ":" + c.AppVersion
}

func TestHelmLint(t *testing.T) {
	for _, args := range [][]string{nil, {"--values", scaleOutValues}, {"--values", tlsValues},
		{"--values", scaleOutValues, "--set", sourcesSet + ",provenanceKey.existingSecret=berth-provenance-key,provenanceKey.passwordKey=password"}} {
		if _, err := helm(t, append([]string{"lint", "--strict", chart}, args...)...); err != nil {
			t.Error(err)
		}
	}
}

// TestHelmDefaults: the default values refuse to render without the public
// URL, saying which value to set; with it, one replica, filesystem storage and
// the SQLite catalog on a volume claim, the upload secret berth creates on
// that volume, and no Secret of the chart's own.
func TestHelmDefaults(t *testing.T) {
	t.Parallel()
	if _, err := helm(t, "template", "berth", chart); err == nil || !strings.Contains(err.Error(), "config.catalog.publicURL is required") {
		t.Errorf("helm template with the default values: %v, want an error naming config.catalog.publicURL", err)
	}
	objs := render(t, minimal...)
	d := checkDeployment(t, objs, chartImage(t), nil)
	if d.config.Storage.Driver != "filesystem" || d.config.Catalog.Postgres() {
		t.Errorf("storage %q, catalog %q: want filesystem and SQLite", d.config.Storage.Driver, d.config.Catalog.Database)
	}
	if d.config.Catalog.PublicURL != "https://berth.example.com" {
		t.Errorf("catalog.publicURL %q, want the value set", d.config.Catalog.PublicURL)
	}
	if len(d.config.TrustedProxies) != 0 {
		t.Errorf("trustedProxies %q, want none by default", d.config.TrustedProxies)
	}
	data := d.mounts[d.config.Data]
	if data.PersistentVolumeClaim == nil {
		t.Fatalf("the data directory %s is not on a volume claim", d.config.Data)
	}
	if _, ok := find(objs, "PersistentVolumeClaim", data.PersistentVolumeClaim.ClaimName); !ok {
		t.Errorf("the volume claim %s is not rendered", data.PersistentVolumeClaim.ClaimName)
	}
	if f := d.config.Registry.HTTPSecretFile; !strings.HasPrefix(f, d.config.Data+"/") {
		t.Errorf("registry.httpSecretFile %s, want the file berth creates on the volume %s", f, d.config.Data)
	}
	if u := d.config.Registry.Uploads; u.MaxSize <= 0 || u.MaxConcurrentPerSubject <= 0 || u.PurgeAfter <= 0 {
		t.Errorf("registry.uploads %+v: want a maximum size, a cap on open uploads and a purge age", u)
	}
	for _, kind := range []string{"Ingress", "ServiceMonitor", "Secret"} {
		if n := len(ofKind(objs, kind)); n != 0 {
			t.Errorf("%d %s objects, want none by default", n, kind)
		}
	}
	if n := len(ofKind(objs, "NetworkPolicy")); n != 1 {
		t.Errorf("%d NetworkPolicies, want one by default", n)
	}
}

// TestHelmScaleOut renders the chart for several replicas: the catalog in
// PostgreSQL and blobs in S3, their credentials and the upload secret from
// existing Secrets, an ingress and a ServiceMonitor.
func TestHelmScaleOut(t *testing.T) {
	t.Parallel()
	const dbURL = "postgres://berth:pw@postgres.db.svc:5432/berth?sslmode=require"
	objs := render(t, "--values", scaleOutValues)
	d := checkDeployment(t, objs, chartImage(t), cluster{
		"berth-postgres":    {"url": dbURL},
		"berth-s3":          {"accessKey": "AKIAEXAMPLE", "secretKey": "s3-secret"},
		"berth-http-secret": {"http-secret": "shared-upload-secret"},
	})
	cfg := d.config
	if n := d.replicas(); n != 2 {
		t.Errorf("replicas %d, want 2", n)
	}
	if cfg.Catalog.Database != dbURL {
		t.Errorf("catalog.database %q, want the URL from Secret berth-postgres", cfg.Catalog.Database)
	}
	if cfg.Storage.Driver != "s3" || cfg.Storage.S3.AccessKey != "AKIAEXAMPLE" {
		t.Errorf("storage %q, access key %q: want s3 with the key from Secret berth-s3", cfg.Storage.Driver, cfg.Storage.S3.AccessKey)
	}
	for file, want := range map[string]string{cfg.Storage.S3.SecretKeyFile: "berth-s3", cfg.Registry.HTTPSecretFile: "berth-http-secret"} {
		if v := d.mounts[path.Dir(file)]; v.Secret == nil || v.Secret.SecretName != want {
			t.Errorf("%s is not in Secret %s", file, want)
		}
	}
	if v := d.mounts[cfg.Data]; v.EmptyDir == nil {
		t.Errorf("the data directory %s of one of several replicas is not an emptyDir", cfg.Data)
	}
	if n := len(ofKind(objs, "PersistentVolumeClaim")); n != 0 {
		t.Errorf("%d PersistentVolumeClaims, want none for several replicas", n)
	}
	if n := len(ofKind(objs, "Secret")); n != 0 {
		t.Errorf("%d Secrets rendered beside the existing ones, want none", n)
	}
	if cfg.Catalog.PublicURL != "https://berth.example.com" {
		t.Errorf("catalog.publicURL %q, want the ingress's host", cfg.Catalog.PublicURL)
	}
	if !slices.Equal(cfg.TrustedProxies, []string{"10.244.0.0/16"}) {
		t.Errorf("trustedProxies %q, want the value trustedProxies", cfg.TrustedProxies)
	}

	svc := ofKind(objs, "Service")[0]
	ings := ofKind(objs, "Ingress")
	if len(ings) != 1 {
		t.Fatalf("%d Ingresses, want one", len(ings))
	}
	var ing ingress
	ings[0].decode(t, &ing)
	if r := ing.Spec.Rules; len(r) != 1 || r[0].Host != "berth.example.com" || len(r[0].HTTP.Paths) != 1 ||
		r[0].HTTP.Paths[0].Path != "/" || r[0].HTTP.Paths[0].Backend.Service.Name != svc.Metadata.Name ||
		r[0].HTTP.Paths[0].Backend.Service.Port.Name != "http" {
		t.Errorf("ingress rules %+v, want berth.example.com/ to the Service's port http", r)
	}
	sms := ofKind(objs, "ServiceMonitor")
	if len(sms) != 1 {
		t.Fatalf("%d ServiceMonitors, want one", len(sms))
	}
	var sm serviceMonitor
	sms[0].decode(t, &sm)
	if !matches(sm.Spec.Selector, svc.Metadata.Labels) {
		t.Errorf("the ServiceMonitor's selector %v does not select the Service %v", sm.Spec.Selector.MatchLabels, svc.Metadata.Labels)
	}
	if e := sm.Spec.Endpoints; len(e) != 1 || e[0].Port != "http" || e[0].Path != "/metrics" {
		t.Errorf("ServiceMonitor endpoints %+v, want port http, path /metrics", e)
	}
}

// TestHelmRefuses checks that the chart refuses values that cannot work,
// saying why.
func TestHelmRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		set  []string
		want string
	}{
		{"several replicas on SQLite", []string{"replicas=2"}, "replicas > 1 needs the catalog in PostgreSQL"},
		{"several replicas on the filesystem", []string{"replicas=2", "database.existingSecret=pg"}, "replicas > 1 needs shared object storage"},
		{"several replicas in memory", []string{"replicas=2", "database.existingSecret=pg", "config.storage.driver=inmemory"}, "replicas > 1 needs shared object storage"},
		{"a database password in the ConfigMap", []string{"config.catalog.database=postgres://u:p@db/berth"}, "config.catalog.database: a PostgreSQL URL holds a password"},
		{"no public URL", []string{"ingress.enabled=true"}, "config.catalog.publicURL is required"},
		{"several replicas without an upload secret", []string{"replicas=2", "database.existingSecret=pg", "config.storage.driver=s3"}, "set httpSecret.existingSecret"},
		{"one replica rolling on PostgreSQL without an upload secret", []string{"persistence.enabled=false", "database.existingSecret=pg", "config.storage.driver=s3"}, "set httpSecret.existingSecret"},
		{"several replicas with auth without a token key", []string{"replicas=2", "database.existingSecret=pg", "config.storage.driver=s3", "httpSecret.existingSecret=h", "config.auth.service=berth"}, "set tokenKey.existingSecret"},
		{"several replicas with sources without a provenance key", []string{"replicas=2", "database.existingSecret=pg", "config.storage.driver=s3", "httpSecret.existingSecret=h", sourcesSet}, "set provenanceKey.existingSecret"},
		{"one replica rolling on PostgreSQL with sources without a provenance key", []string{"persistence.enabled=false", "database.existingSecret=pg", "config.storage.driver=s3", "httpSecret.existingSecret=h", sourcesSet}, "need one provenance key shared by all"},
		{"one replica rolling with sources and a signing key file of its own", []string{"persistence.enabled=false", "database.existingSecret=pg", "config.storage.driver=s3", "httpSecret.existingSecret=h", sourcesSet, "config.sources.signingKey=/etc/keys/provenance.key"}, "set provenanceKey.existingSecret"},
		{"one replica on PostgreSQL and a volume with sources without a signing key", []string{"database.existingSecret=pg", sourcesSet}, "need sources.signingKey, which berth requires then"},
		{"a signing key of its own beside the provenance key Secret", []string{"provenanceKey.existingSecret=pk", "config.sources.signingKey=/data/mine.key"}, "config.sources.signingKey and provenanceKey.existingSecret both name"},
		{"a provenance key password without its Secret", []string{"provenanceKey.passwordKey=password"}, "provenanceKey.passwordKey names a key of the Secret provenanceKey.existingSecret, which is not set"},
		{"TLS without a Secret", []string{"tls.enabled=true"}, "tls.enabled needs tls.secretName"},
		{"TLS requiring client certificates", []string{"tls.enabled=true", "tls.secretName=t", "tls.clientAuth=require"}, "tls.clientAuth require: the kubelet's probes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"template", "berth", chart}
			if !strings.Contains(tc.want, "publicURL") {
				args = append(args, minimal...)
			}
			for _, s := range tc.set {
				args = append(args, "--set", s)
			}
			_, err := helm(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template --set %s: %v, want an error saying %q", strings.Join(tc.set, ","), err, tc.want)
			}
		})
	}
}

// TestHelmAuthTokenKey: with an auth section and several replicas, every
// replica reads one token key from the existing Secret tokenKey names,
// mounted at auth.keyFile; one replica without it keeps the key berth makes on
// its volume; without auth there is none. The chart never renders a key.
func TestHelmAuthTokenKey(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	secrets := cluster{
		"berth-postgres":    {"url": "postgres://berth:pw@postgres.db.svc:5432/berth?sslmode=require"},
		"berth-s3":          {"accessKey": "AKIAEXAMPLE", "secretKey": "s3-secret"},
		"berth-http-secret": {"http-secret": "shared-upload-secret"},
		"berth-tokens":      {"key.pem": string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))},
	}
	objs := render(t, "--values", scaleOutValues, "--set", "config.auth.service=berth,config.auth.keyFile=/data/mine.pem,tokenKey.existingSecret=berth-tokens,tokenKey.key=key.pem")
	d := checkDeployment(t, objs, chartImage(t), secrets)
	if v := d.mounts[path.Dir(d.config.Auth.KeyFile)]; v.Secret == nil || v.Secret.SecretName != "berth-tokens" || path.Base(d.config.Auth.KeyFile) != "key.pem" {
		t.Errorf("auth.keyFile %s is not key.pem of the existing Secret berth-tokens", d.config.Auth.KeyFile)
	}
	if d.config.Auth.Service != "berth" {
		t.Errorf("auth.service %q: the chart's auth.keyFile replaced the auth section", d.config.Auth.Service)
	}

	one := render(t, append(minimal, "--set", "config.auth.service=berth")...)
	d = checkDeployment(t, one, chartImage(t), nil)
	if f := d.config.Auth.KeyFile; !strings.HasPrefix(f, d.config.Data+"/") {
		t.Errorf("one replica: auth.keyFile %s, want the key berth creates on the volume %s", f, d.config.Data)
	}

	for _, objs := range [][]object{objs, one, render(t, "--values", scaleOutValues), render(t, minimal...)} {
		if n := len(ofKind(objs, "Secret")); n != 0 {
			t.Errorf("%d Secrets rendered, want none: the chart generates no key", n)
		}
	}
}

// TestHelmStrategy: pods are replaced one after the other (Recreate) while
// the catalog is SQLite, whose pods cannot overlap on one volume or one
// storage, and by a rolling update on PostgreSQL.
func TestHelmStrategy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"defaults", minimal, "Recreate"},
		{"SQLite on S3 without a volume", append([]string{"--set", "persistence.enabled=false", "--set", "config.storage.driver=s3"}, minimal...), "Recreate"},
		{"one replica on PostgreSQL and S3", append([]string{"--set", "persistence.enabled=false", "--set", "config.storage.driver=s3", "--set", "database.existingSecret=pg", "--set", "httpSecret.existingSecret=h"}, minimal...), "RollingUpdate"},
		{"scale-out", []string{"--values", scaleOutValues}, "RollingUpdate"},
	} {
		ds := ofKind(render(t, tc.args...), "Deployment")
		if len(ds) != 1 {
			t.Fatalf("%s: %d Deployments, want one", tc.name, len(ds))
		}
		var w workload
		ds[0].decode(t, &w)
		if w.Spec.Strategy.Type != tc.want {
			t.Errorf("%s: strategy %q, want %s", tc.name, w.Spec.Strategy.Type, tc.want)
		}
	}
}

// TestHelmProvenanceKey: with sources and several replicas, every replica
// signs with one provenance key, the existing Secret provenanceKey names
// mounted at sources.signingKey, with its password from the same Secret in
// $BERTH_SOURCES_KEY_PASSWORD, never a plain value, and the rest of
// config.sources kept. Without that Secret the chart refuses, saying how to
// make one; one pod keeps the key berth makes on its volume, and one on
// PostgreSQL may name that file itself. The chart never renders a key.
func TestHelmProvenanceKey(t *testing.T) {
	t.Parallel()
	const password = "provenance-key-password"
	keyFile := filepath.Join(t.TempDir(), "provenance.key")
	if _, err := signing.LoadOrCreateSigner(keyFile, []byte(password)); err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	secrets := cluster{
		"berth-postgres":    {"url": "postgres://berth:pw@postgres.db.svc:5432/berth?sslmode=require"},
		"berth-s3":          {"accessKey": "AKIAEXAMPLE", "secretKey": "s3-secret"},
		"berth-http-secret": {"http-secret": "shared-upload-secret"},
		"berth-provenance":  {"signing.key": string(key), "password": password},
	}
	scaleOut := append([]string{"--values", scaleOutValues}, withSources...)
	if _, err := helm(t, append([]string{"template", "berth", chart}, scaleOut...)...); err == nil ||
		!strings.Contains(err.Error(), "cosign generate-key-pair") || !strings.Contains(err.Error(), "kubectl create secret generic") {
		t.Errorf("several replicas with sources and no provenance key: %v, want a refusal saying how to make the key and its Secret", err)
	}

	objs := render(t, append(scaleOut, "--set", "provenanceKey.existingSecret=berth-provenance,provenanceKey.key=signing.key,provenanceKey.passwordKey=password,config.sources.allowHosts[0]=github.com")...)
	d := checkDeployment(t, objs, chartImage(t), secrets)
	f := d.config.Sources.SigningKey
	if v := d.mounts[path.Dir(f)]; v.Secret == nil || v.Secret.SecretName != "berth-provenance" || path.Base(f) != "signing.key" {
		t.Errorf("sources.signingKey %q is not signing.key of the existing Secret berth-provenance", f)
	}
	if !slices.Equal(d.config.Sources.AllowHosts, []string{"github.com"}) {
		t.Errorf("sources.allowHosts %q: the chart's sources.signingKey replaced the sources section", d.config.Sources.AllowHosts)
	}
	c := d.pod.Containers[0]
	i := slices.IndexFunc(c.Env, func(e envVar) bool { return e.Name == sources.KeyPasswordEnv })
	if i < 0 {
		t.Fatalf("no %s in the container's environment", sources.KeyPasswordEnv)
	}
	if e := c.Env[i]; e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil ||
		e.ValueFrom.SecretKeyRef.Name != "berth-provenance" || e.ValueFrom.SecretKeyRef.Key != "password" {
		t.Errorf("%s: want it from key password of the Secret berth-provenance, got %+v", sources.KeyPasswordEnv, e)
	}

	one := render(t, append(minimal, withSources...)...)
	d = checkDeployment(t, one, chartImage(t), nil)
	if f := d.config.Sources.SigningKey; f != "" {
		t.Errorf("one pod: sources.signingKey %s, want none: the key berth creates in %s", f, d.config.Data)
	}
	if slices.ContainsFunc(d.pod.Containers[0].Env, func(e envVar) bool { return e.Name == sources.KeyPasswordEnv }) {
		t.Errorf("one pod without provenanceKey: %s set", sources.KeyPasswordEnv)
	}

	onPostgres := render(t, append(minimal, "--set", sourcesSet+",database.existingSecret=berth-postgres,config.sources.signingKey=/data/provenance.key")...)
	d = checkDeployment(t, onPostgres, chartImage(t), secrets)
	if f := d.config.Sources.SigningKey; f != "/data/provenance.key" {
		t.Errorf("one pod on PostgreSQL: sources.signingKey %q, want the file named, on the volume", f)
	}

	for _, objs := range [][]object{objs, one, onPostgres} {
		if n := len(ofKind(objs, "Secret")); n != 0 {
			t.Errorf("%d Secrets rendered, want none: the chart generates no key", n)
		}
	}
}

// TestHelmNotesProvenanceKey: with sources, the installation notes say which
// key signs what berth builds (the file berth made on the volume, or one
// that an emptyDir loses, or the Secret's) and how to get its public key.
func TestHelmNotesProvenanceKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"one pod", append(minimal, withSources...), []string{"/data/provenance.key on the volume", "GET /api/v1/sources/key", "berth sources key"}, []string{"emptyDir:\na new pod makes a new one, and"}},
		{"an emptyDir", append(minimal, "--set", sourcesSet+",persistence.enabled=false"), []string{"/data/provenance.key, on an emptyDir", "set provenanceKey.existingSecret", "GET /api/v1/sources/key"}, nil},
		{"a Secret", append(minimal, "--set", sourcesSet+",provenanceKey.existingSecret=berth-provenance"), []string{"the key provenance.key\nof the Secret berth-provenance", "GET /api/v1/sources/key"}, []string{"first start, /data/provenance.key"}},
		{"no sources", minimal, nil, []string{"provenance", "sources key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := notes(t, tc.args...)
			for _, w := range tc.want {
				if !strings.Contains(n, w) {
					t.Errorf("the notes do not say %q:\n%s", w, n)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(n, w) {
					t.Errorf("the notes say %q:\n%s", w, n)
				}
			}
		})
	}
}

// notes renders the chart's NOTES.txt, which helm template leaves out, with
// the helm template args: through a copy of the chart with one more template
// that includes it.
func notes(t *testing.T, args ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "berth")
	if err := os.CopyFS(dir, os.DirFS(chart)); err != nil {
		t.Fatal(err)
	}
	const show = "templates/notes-test.yaml"
	tpl := "kind: Notes\ntext: {{ include \"berth/templates/NOTES.txt\" . | toJson }}\n"
	if err := os.WriteFile(filepath.Join(dir, show), []byte(tpl), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helm(t, append([]string{"template", "berth", dir, "--show-only", show}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Text string `yaml:"text"`
	}
	if err := yaml.Unmarshal(out, &doc); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return doc.Text
}
