package deploy

import (
	"cmp"
	"encoding/base64"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/sources"
)

// cluster is what exists beside a rendering: the Secrets its values name,
// key by key, as an operator creates them before installing.
type cluster map[string]map[string]string

// deployment is a rendering checked by checkDeployment: its workload, the
// volumes mounted in berth's container and the configuration berth would run
// with.
type deployment struct {
	objs      []object
	workload  workload
	pod       podSpec
	podLabels map[string]string
	mounts    map[string]volume // by mount path
	config    *config.Config
}

// checkDeployment checks what every way of running berth on Kubernetes must
// hold: one workload running image as `serve --config FILE`, with FILE in a
// mounted ConfigMap that holds a configuration berth accepts, the files that
// configuration reads mounted, its data directory and /tmp writable, the
// probes on /healthz and /readyz at the port berth listens on, a locked-down
// security context, a Service in front, and a PodDisruptionBudget exactly
// when there are several replicas.
func checkDeployment(t *testing.T, objs []object, image string, secrets cluster) *deployment {
	t.Helper()
	d := &deployment{objs: objs, mounts: map[string]volume{}}
	workloads := append(ofKind(objs, "Deployment"), ofKind(objs, "StatefulSet")...)
	if len(workloads) != 1 {
		t.Fatalf("want one Deployment or StatefulSet, got %d", len(workloads))
	}
	workloads[0].decode(t, &d.workload)
	d.pod = d.workload.Spec.Template.Spec
	d.podLabels = d.workload.Spec.Template.Metadata.Labels
	if !matches(d.workload.Spec.Selector, d.podLabels) {
		t.Errorf("the workload's selector %v does not select its pods %v", d.workload.Spec.Selector.MatchLabels, d.podLabels)
	}
	i := slices.IndexFunc(d.pod.Containers, func(c container) bool { return c.Name == "berth" })
	if i < 0 {
		t.Fatal("no container named berth")
	}
	c := d.pod.Containers[i]
	if c.Image != image {
		t.Errorf("image %q, want %q", c.Image, image)
	}

	// The command: the image's entrypoint is /berth.
	cmd := append(append([]string(nil), c.Command...), c.Args...)
	if len(c.Command) > 0 && c.Command[0] == "/berth" {
		cmd = cmd[1:]
	}
	if len(cmd) < 3 || cmd[0] != "serve" {
		t.Fatalf("command %q, want serve --config FILE", cmd)
	}
	configFile := ""
	for i, a := range cmd {
		if a == "--config" && i+1 < len(cmd) {
			configFile = cmd[i+1]
		}
	}
	if configFile == "" {
		t.Fatalf("command %q has no --config FILE", cmd)
	}

	// The pod's file system: every mount, its Secrets and ConfigMaps written
	// out under root.
	root := t.TempDir()
	writable := map[string]bool{}
	for _, m := range c.VolumeMounts {
		v, ok := d.volume(m.Name)
		if !ok {
			t.Fatalf("volume mount %s: no volume %q", m.MountPath, m.Name)
		}
		d.mounts[m.MountPath] = v
		dir := filepath.Join(root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		var files map[string]string
		switch {
		case v.ConfigMap != nil:
			o, ok := find(objs, "ConfigMap", v.ConfigMap.Name)
			if !ok {
				t.Fatalf("volume %s: ConfigMap %q is not in the rendering", v.Name, v.ConfigMap.Name)
			}
			var cm configMap
			o.decode(t, &cm)
			files = cm.Data
		case v.Secret != nil:
			// The kubelet renews a Secret's files in place, and berth reads
			// them again (a rotated certificate), but not through a subPath.
			if m.SubPath != "" {
				t.Errorf("volume mount %s: Secret %s mounted with subPath %s is never renewed", m.MountPath, v.Secret.SecretName, m.SubPath)
			}
			files = d.secret(t, v.Secret.SecretName, secrets)
		default: // an emptyDir or a volume claim
			writable[m.MountPath] = !m.ReadOnly
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	if v, ok := d.mounts[path.Dir(configFile)]; !ok || v.ConfigMap == nil {
		t.Errorf("--config %s: its directory is not a mounted ConfigMap", configFile)
	}
	if !writable["/tmp"] {
		t.Error("/tmp is not a writable emptyDir (the root file system is read-only)")
	}

	// The configuration, as berth serve loads it.
	var environ []string
	for _, e := range c.Env {
		value := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			v, ok := d.secret(t, ref.Name, secrets)[ref.Key]
			if !ok {
				t.Errorf("env %s: Secret %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			value = v
		}
		environ = append(environ, e.Name+"="+value)
	}
	cfg, err := config.Load(filepath.Join(root, configFile), environ)
	if err != nil {
		t.Fatal(err)
	}
	cfg.SetDefaults()
	d.config = cfg
	if !underWritable(cfg.Data, writable) {
		t.Errorf("data directory %s is not on a writable volume", cfg.Data)
	}
	// The files berth reads must be in the pod; the upload secret may also be
	// one berth creates on its first start, in a writable directory.
	if f := cfg.Registry.HTTPSecretFile; !underWritable(f, writable) {
		if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || strings.TrimSpace(string(b)) == "" {
			t.Errorf("registry.httpSecretFile %s: not in a mounted Secret (%v) nor in a writable directory", f, err)
		}
	}
	// With auth, the token key: replicas must share it, so it comes from a
	// mounted Secret; one replica may create its own in a writable directory.
	if cfg.Auth != nil {
		if f := cfg.Auth.KeyFile; d.replicas() > 1 || !underWritable(f, writable) {
			checkTokenKey(t, filepath.Join(root, f), f)
		}
	}
	// With sources, the provenance key: replicas must share it, so it comes
	// from a mounted Secret, and its password from the environment; one pod
	// may create its own in a writable directory.
	if len(cfg.TrackedSources()) > 0 {
		f := cmp.Or(cfg.Sources.SigningKey, path.Join(cfg.Data, "provenance.key"))
		if d.replicas() > 1 || !underWritable(f, writable) {
			checkProvenanceKey(t, filepath.Join(root, f), f, envValue(environ, sources.KeyPasswordEnv))
		}
	}
	// The TLS files berth serves with must be in the pod, as Secrets.
	for key, f := range map[string]string{"http.tls.certificate": cfg.HTTP.TLS.Certificate, "http.tls.key": cfg.HTTP.TLS.Key, "http.tls.clientCA": cfg.HTTP.TLS.ClientCA} {
		if f == "" {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(root, f)); err != nil || len(b) == 0 {
			t.Errorf("%s %s: not in a mounted Secret (%v)", key, f, err)
		}
	}
	// Validate opens the key files: a copy names them under root.
	inPod := *cfg
	tls := &inPod.HTTP.TLS
	for _, f := range []*string{&inPod.Storage.S3.SecretKeyFile, &inPod.Storage.GCS.KeyFile, &inPod.Storage.Azure.AccountKeyFile, &tls.Certificate, &tls.Key, &tls.ClientCA} {
		if *f != "" {
			*f = filepath.Join(root, *f)
		}
	}
	if err := inPod.Validate(); err != nil {
		t.Errorf("berth refuses the configuration: %v", err)
	}

	// The port berth listens on, the probes and the Service.
	_, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]string{}
	for _, p := range c.Ports {
		n := strconv.Itoa(p.ContainerPort)
		ports[p.Name], ports[n] = n, n
	}
	if ports[port] != port {
		t.Errorf("berth listens on %s (addr %q), but the container has no such port (%v)", port, cfg.Addr, c.Ports)
	}
	scheme := "HTTP"
	if cfg.HTTP.TLS.Enabled() {
		scheme = "HTTPS"
	}
	for _, p := range []struct {
		name  string
		probe *probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}, {"startup", c.StartupProbe, "/healthz"}} {
		switch {
		case p.probe == nil && p.name == "startup":
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("no HTTP %s probe", p.name)
		case p.probe.HTTPGet.Path != p.path || ports[p.probe.HTTPGet.Port] != port:
			t.Errorf("%s probe GET %s on port %s, want %s on %s", p.name, p.probe.HTTPGet.Path, p.probe.HTTPGet.Port, p.path, port)
		case cmp.Or(p.probe.HTTPGet.Scheme, "HTTP") != scheme:
			t.Errorf("%s probe scheme %q, want %s: berth serves %s", p.name, p.probe.HTTPGet.Scheme, scheme, scheme)
		}
	}
	services := ofKind(objs, "Service")
	if len(services) != 1 {
		t.Fatalf("want one Service, got %d", len(services))
	}
	var svc service
	services[0].decode(t, &svc)
	if !matches(selector{svc.Spec.Selector}, d.podLabels) {
		t.Errorf("the Service's selector %v does not select the pods %v", svc.Spec.Selector, d.podLabels)
	}
	if len(svc.Spec.Ports) == 0 || ports[svc.Spec.Ports[0].TargetPort] != port {
		t.Errorf("the Service's ports %v do not target berth's port %s", svc.Spec.Ports, port)
	}

	// The security context: the container's, else the pod's.
	sc, psc := c.SecurityContext, d.pod.SecurityContext
	if !isTrue(sc.RunAsNonRoot) && !isTrue(psc.RunAsNonRoot) {
		t.Error("runAsNonRoot is not set")
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) {
		t.Error("readOnlyRootFilesystem is not set")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Errorf("capabilities drop %v, want ALL", sc.Capabilities.Drop)
	}
	if sc.SeccompProfile.Type != "RuntimeDefault" && psc.SeccompProfile.Type != "RuntimeDefault" {
		t.Error("no RuntimeDefault seccomp profile")
	}
	// A Service named berth would put BERTH_PORT and the like into the
	// environment, where berth looks for its settings.
	if d.pod.EnableServiceLinks == nil || *d.pod.EnableServiceLinks {
		t.Error("enableServiceLinks is not false")
	}

	replicas := d.replicas()
	pdbs := ofKind(objs, "PodDisruptionBudget")
	switch {
	case replicas > 1 && len(pdbs) != 1:
		t.Errorf("%d replicas and %d PodDisruptionBudgets, want one", replicas, len(pdbs))
	case replicas <= 1 && len(pdbs) != 0:
		t.Errorf("one replica and %d PodDisruptionBudgets, want none: it would block every drain", len(pdbs))
	case len(pdbs) == 1:
		var pdb labelSelected
		pdbs[0].decode(t, &pdb)
		if !matches(pdb.Spec.Selector, d.podLabels) {
			t.Errorf("the PodDisruptionBudget's selector %v does not select the pods", pdb.Spec.Selector.MatchLabels)
		}
	}
	return d
}

// checkTokenKey checks that file, the auth.keyFile named, is there and
// holds a key berth signs with.
func checkTokenKey(t *testing.T, file, named string) {
	t.Helper()
	if _, err := os.Stat(file); err != nil {
		t.Errorf("auth.keyFile %s: not in a mounted Secret: %v", named, err)
		return
	}
	if _, err := auth.NewAuthn(&config.Auth{KeyFile: file}, auth.AuthnOptions{}); err != nil {
		t.Errorf("auth.keyFile %s: berth refuses the key: %v", named, err)
	}
}

// checkProvenanceKey checks that file, the sources.signingKey named, is
// there and holds a key berth signs with, decrypted with password.
func checkProvenanceKey(t *testing.T, file, named, password string) {
	t.Helper()
	if _, err := os.Stat(file); err != nil {
		t.Errorf("sources.signingKey %s: not in a mounted Secret: %v", named, err)
		return
	}
	if _, err := signing.LoadSigner(file, []byte(password)); err != nil {
		t.Errorf("sources.signingKey %s: berth cannot load the key with $%s: %v", named, sources.KeyPasswordEnv, err)
	}
}

// envValue is the value of the variable name in environ, as os.Environ
// lists them.
func envValue(environ []string, name string) string {
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return v
		}
	}
	return ""
}

// replicas is the workload's number of replicas (Kubernetes' default: 1).
func (d *deployment) replicas() int {
	if r := d.workload.Spec.Replicas; r != nil {
		return *r
	}
	return 1
}

// volume returns the pod's volume or volume claim template named name; a
// claim template is returned as a volume claim.
func (d *deployment) volume(name string) (volume, bool) {
	for _, v := range d.pod.Volumes {
		if v.Name == name {
			return v, true
		}
	}
	for _, c := range d.workload.Spec.VolumeClaimTemplates {
		if c.Metadata.Name == name {
			return volume{Name: name, PersistentVolumeClaim: &claim{ClaimName: name}}, true
		}
	}
	return volume{}, false
}

// secret returns the keys of the Secret named name: the rendering's, or the
// cluster's.
func (d *deployment) secret(t *testing.T, name string, secrets cluster) map[string]string {
	t.Helper()
	if o, ok := find(d.objs, "Secret", name); ok {
		var s secret
		o.decode(t, &s)
		out := map[string]string{}
		for k, v := range s.Data {
			b, err := base64.StdEncoding.DecodeString(v)
			if err != nil {
				t.Fatalf("Secret %s, key %s: %v", name, k, err)
			}
			out[k] = string(b)
		}
		for k, v := range s.StringData {
			out[k] = v
		}
		return out
	}
	s, ok := secrets[name]
	if !ok {
		t.Fatalf("Secret %s is neither rendered nor one the cluster has", name)
	}
	return s
}

// underWritable reports whether file is in one of the writable mounts.
func underWritable(file string, writable map[string]bool) bool {
	for dir, ok := range writable {
		if ok && (file == dir || strings.HasPrefix(file, strings.TrimSuffix(dir, "/")+"/")) {
			return true
		}
	}
	return false
}

// matches reports whether s selects objects labelled labels.
func matches(s selector, labels map[string]string) bool {
	if len(s.MatchLabels) == 0 {
		return false
	}
	for k, v := range s.MatchLabels {
		if labels[k] != v {
			return false
		}
	}
	return true
}

func isTrue(b *bool) bool { return b != nil && *b }

// TestMain stops the PostgreSQL cluster the dashboard's berth runs on.
func TestMain(m *testing.M) { os.Exit(pgtest.Run(m)) }
