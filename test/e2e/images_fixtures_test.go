package e2e

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// upstreams are two distribution registries standing in for quay.io and
// ghcr.io. Images are named by their public reference everywhere (in
// packages, in the archive, at the mirror); only the push, and berth mirror
// export through --registry-map, reach the stand-in.
type upstreams struct {
	hosts map[string]*server // public host → its stand-in
}

// startUpstreams starts the stand-ins of quay.io and ghcr.io.
func startUpstreams(t *testing.T) *upstreams {
	t.Helper()
	requireTool(t, "crane", craneBin)
	return &upstreams{hosts: map[string]*server{"quay.io": startUpstreamRegistry(t, ""), "ghcr.io": startUpstreamRegistry(t, "")}}
}

// registryMap is the --registry-map flags that read each public host from its stand-in.
func (u *upstreams) registryMap() []string {
	var args []string
	for _, host := range []string{"quay.io", "ghcr.io"} {
		args = append(args, "--registry-map", host+"="+u.hosts[host].addr)
	}
	return args
}

// at is where the public reference ref (quay.io/org/img:tag) lives at its stand-in.
func (u *upstreams) at(t *testing.T, ref string) string {
	t.Helper()
	host, rest, _ := strings.Cut(ref, "/")
	s, ok := u.hosts[host]
	if !ok {
		t.Fatalf("%s: no stand-in for %s", ref, host)
	}
	return s.addr + "/" + rest
}

// image is an image the test pushed to a stand-in.
type image struct {
	// repo is its public repository (quay.io/org/img); tag the tag pushed.
	repo, tag string
	// digest is the digest of the index, or of the manifest of a
	// single-platform image.
	digest string
	// platforms maps os/arch of each platform to its manifest's digest.
	platforms map[string]string
}

// byDigest is the image's public reference by digest.
func (i image) byDigest() string { return i.repo + "@" + i.digest }

// byTag is the image's public reference by tag.
func (i image) byTag() string { return i.repo + ":" + i.tag }

// pushImage builds, with crane, one image per platform (os/arch) from the
// empty image and a layer of random bytes, then an index of them when there
// are several, and pushes it to the stand-in of the public reference
// repo:tag.
func (u *upstreams) pushImage(t *testing.T, repo, tag string, platforms ...string) image {
	t.Helper()
	img := image{repo: repo, tag: tag, platforms: map[string]string{}}
	dir := t.TempDir()
	var refs []string
	for _, p := range platforms {
		layer := filepath.Join(dir, strings.ReplaceAll(p, "/", "-")+".tar")
		writeRandomLayer(t, layer, 16<<10)
		build := u.at(t, repo+":build-"+tag+"-"+strings.ReplaceAll(p, "/", "-"))
		mustRun(t, dir, craneBin, "append", "--oci-empty-base", "-f", layer, "-t", build)
		mustRun(t, dir, craneBin, "mutate", "--set-platform", p, build, "-t", build)
		d := strings.TrimSpace(mustRun(t, dir, craneBin, "digest", build).stdout)
		img.platforms[p] = d
		refs = append(refs, "-m", u.at(t, repo+"@"+d))
	}
	target := u.at(t, repo+":"+tag)
	if len(platforms) == 1 {
		mustRun(t, dir, craneBin, "tag", u.at(t, repo+"@"+img.platforms[platforms[0]]), tag)
	} else {
		mustRun(t, dir, craneBin, append(append([]string{"index", "append"}, refs...), "-t", target)...)
	}
	img.digest = strings.TrimSpace(mustRun(t, dir, craneBin, "digest", target).stdout)
	return img
}

// writeRandomLayer writes an uncompressed layer tar holding one file of n random bytes.
func writeRandomLayer(t *testing.T, path string, n int) {
	t.Helper()
	data := make([]byte, n)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "data/" + filepath.Base(path), Mode: 0o644, Size: int64(n), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pushWideIndex pushes, as repo:tag at its stand-in, an index of n
// platforms (linux/arch000 …), each a manifest of its own config and one
// shared layer. It is built in process: n crane runs would take minutes.
func (u *upstreams) pushWideIndex(t *testing.T, repo, tag string, n int) image {
	t.Helper()
	ref, err := name.ParseReference(u.at(t, repo+":"+tag), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	shared := make([]byte, 4<<10)
	if _, err := rand.Read(shared); err != nil {
		t.Fatal(err)
	}
	layer := static.NewLayer(shared, types.OCILayer)
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	img := image{repo: repo, tag: tag, platforms: map[string]string{}}
	for i := range n {
		p := v1.Platform{OS: "linux", Architecture: fmt.Sprintf("arch%03d", i)}
		base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
		one, err := mutate.AppendLayers(base, layer)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := one.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cfg = cfg.DeepCopy()
		cfg.OS, cfg.Architecture = p.OS, p.Architecture
		if one, err = mutate.ConfigFile(one, cfg); err != nil {
			t.Fatal(err)
		}
		d, err := one.Digest()
		if err != nil {
			t.Fatal(err)
		}
		img.platforms[p.OS+"/"+p.Architecture] = d.String()
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: one, Descriptor: v1.Descriptor{Platform: &p}})
	}
	if err := remote.WriteIndex(ref, idx); err != nil {
		t.Fatalf("pushing the %d-platform index %s: %v", n, ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatal(err)
	}
	img.digest = d.String()
	return img
}

// writeTree writes files (relative path → content) under a new folder and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// olmBundle is a registry+v1 bundle of package pkg whose CSV runs operator
// in its deployment (and names it in containerImage), init as the
// deployment's init container, and lists operand and operator as related
// images.
func olmBundle(t *testing.T, pkg, version, operator, init, operand string) string {
	t.Helper()
	csv := fmt.Sprintf(`apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: %[1]s.v%[2]s
  annotations:
    containerImage: %[3]s
spec:
  displayName: E2E images operator
  description: An operator whose images the mirror end-to-end test carries.
  version: %[2]s
  installModes:
    - {type: OwnNamespace, supported: true}
    - {type: SingleNamespace, supported: true}
    - {type: MultiNamespace, supported: false}
    - {type: AllNamespaces, supported: true}
  install:
    strategy: deployment
    spec:
      deployments:
        - name: %[1]s-controller
          spec:
            replicas: 1
            selector:
              matchLabels: {app: %[1]s}
            template:
              metadata:
                labels: {app: %[1]s}
              spec:
                initContainers:
                  - name: setup
                    image: %[4]s
                containers:
                  - name: manager
                    image: %[3]s
  relatedImages:
    - name: manager
      image: %[3]s
    - name: operand
      image: %[5]s
`, pkg, version, operator, init, operand)
	annotations := fmt.Sprintf(`annotations:
  operators.operatorframework.io.bundle.mediatype.v1: registry+v1
  operators.operatorframework.io.bundle.manifests.v1: manifests/
  operators.operatorframework.io.bundle.metadata.v1: metadata/
  operators.operatorframework.io.bundle.package.v1: %s
  operators.operatorframework.io.bundle.channels.v1: stable
  operators.operatorframework.io.bundle.channel.default.v1: stable
`, pkg)
	return writeTree(t, map[string]string{
		"manifests/" + pkg + ".clusterserviceversion.yaml": csv,
		"metadata/annotations.yaml":                        annotations,
	})
}

// helmChart is a chart whose default values run repository:tag in its
// Deployment, beside a sidecar named whole in the values.
func helmChart(t *testing.T, chart, repository, tag, sidecar string) string {
	t.Helper()
	return writeTree(t, map[string]string{
		"Chart.yaml":  fmt.Sprintf("apiVersion: v2\nname: %s\nversion: 0.1.0\nappVersion: %q\ndescription: A chart whose images the mirror end-to-end test carries.\n", chart, tag),
		"values.yaml": fmt.Sprintf("replicas: 1\nimage:\n  repository: %s\n  tag: %q\nsidecar:\n  image: %s\n", repository, tag, sidecar),
		"templates/deployment.yaml": deploymentYAML("{{ .Release.Name }}-web", "{{ .Values.replicas }}",
			`"{{ .Values.image.repository }}:{{ .Values.image.tag }}"`, `{{ .Values.sidecar.image | quote }}`),
	})
}

// kudoOperator is a KUDO operator whose template runs the default of its
// IMAGE parameter.
func kudoOperator(t *testing.T, operator, img string) string {
	t.Helper()
	return writeTree(t, map[string]string{
		"operator.yaml": fmt.Sprintf(`apiVersion: kudo.dev/v1beta1
name: %q
appVersion: "1.0.0"
operatorVersion: "0.1.0"
kubernetesVersion: 1.15.0
maintainers:
  - name: berth e2e
    email: e2e@example.com
url: https://example.com/e2e
tasks:
  - name: app
    kind: Apply
    spec:
      resources:
        - deployment.yaml
plans:
  deploy:
    strategy: serial
    phases:
      - name: main
        strategy: parallel
        steps:
          - name: everything
            tasks:
              - app
`, operator),
		"params.yaml":               fmt.Sprintf("apiVersion: kudo.dev/v1beta1\nparameters:\n  - name: IMAGE\n    description: The image the operator runs\n    default: %q\n  - name: REPLICAS\n    default: 1\n", img),
		"templates/deployment.yaml": deploymentYAML("{{ .Name }}-app", "{{ .Params.REPLICAS }}", "{{ .Params.IMAGE }}"),
	})
}

// plainManifests is a plain package whose one Deployment runs each of images.
func plainManifests(t *testing.T, images ...string) string {
	t.Helper()
	quoted := make([]string, len(images))
	for i, img := range images {
		quoted[i] = strconv.Quote(img)
	}
	return writeTree(t, map[string]string{"manifests/deployment.yaml": deploymentYAML("plain-app", "1", quoted...)})
}

// deploymentYAML is a Deployment whose pod runs a container of each of
// images, each as written in YAML (quoted, or a template expression).
func deploymentYAML(name, replicas string, images ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %s
spec:
  replicas: %s
  selector:
    matchLabels: {app: e2e}
  template:
    metadata:
      labels: {app: e2e}
    spec:
      containers:
`, name, replicas)
	for i, img := range images {
		fmt.Fprintf(&b, "        - name: c%d\n          image: %s\n", i, img)
	}
	return b.String()
}

// imageSite is a source berth whose packages run images pushed to the
// stand-ins, some signed with kp by the real cosign.
type imageSite struct {
	up  *upstreams
	src *server
	kp  keyPair
	// The images of namespace apps.
	operator, operand, init, other, img, kudoApp, plain, grafana image
	// The images of namespace hostile: odd runs beside a reference with @@,
	// wide is an index of widePlatforms platforms.
	odd, wide image
	// bad is the reference with @@; etcdImage the digest the shared etcd
	// fixture names, which no stand-in holds.
	bad, etcdImage string
}

// widePlatforms is the platform count of the hostile wide index.
const widePlatforms = 200

// startImageSite pushes the images and the packages: in namespace apps an
// OLM bundle, a Helm chart, a KUDO operator and a plain package generated
// here, and the shared grafana-operator fixture (its CSV names
// quay.io/integreatly/grafana-operator by tag, pushed to the quay.io
// stand-in); in namespace hostile a plain package with a reference with @@,
// one running the wide index, and the shared etcd fixture, whose CSV names
// quay.io/coreos/etcd-operator by a digest nobody can push.
func startImageSite(t *testing.T) *imageSite {
	t.Helper()
	s := &imageSite{up: startUpstreams(t), kp: cosignKeyPair(t)}
	s.src = startServer(t, "")
	amd, arm, s390 := "linux/amd64", "linux/arm64", "linux/s390x"
	s.operator = s.up.pushImage(t, "quay.io/org/operator", "1.0", amd, arm, s390)
	s.operand = s.up.pushImage(t, "quay.io/org/operand", "2.0", amd, arm)
	s.init = s.up.pushImage(t, "ghcr.io/org/init", "1.0", amd)
	s.other = s.up.pushImage(t, "ghcr.io/org/other", "1.0", amd, arm)
	s.img = s.up.pushImage(t, "quay.io/org/img", "3.1", amd)
	s.kudoApp = s.up.pushImage(t, "quay.io/org/kudo-app", "0.1", amd, arm)
	s.plain = s.up.pushImage(t, "ghcr.io/org/plain", "5", amd, arm)
	s.grafana = s.up.pushImage(t, "quay.io/integreatly/grafana-operator", "v3.10.2", amd)
	s.odd = s.up.pushImage(t, "quay.io/org/odd", "1", amd)
	s.wide = s.up.pushWideIndex(t, "quay.io/org/wide", "many", widePlatforms)
	s.bad = "quay.io/org/bad@@" + s.img.digest
	s.etcdImage = "quay.io/coreos/etcd-operator@sha256:66a37fd61a06a43969854ee6d3e21087a98b93838e284a6086b13917f96b0d9b"

	// Signed in cosign's tag scheme at the stand-ins; the operator attested too.
	for _, img := range []image{s.operator, s.operand, s.plain} {
		cosign(t, s.kp.dir, "sign", "--key", s.kp.key, "--tlog-upload=false", "--yes", s.up.at(t, img.byDigest()))
	}
	predicate := filepath.Join(t.TempDir(), "provenance.json")
	if err := os.WriteFile(predicate, []byte(`{"buildType":"https://example.com/images-e2e","builder":{"id":"https://ci.example.com"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cosign(t, s.kp.dir, "attest", "--key", s.kp.key, "--tlog-upload=false", "--yes", "--type", "slsaprovenance",
		"--predicate", predicate, s.up.at(t, s.operator.byDigest()))

	apps := s.src.addr + "/apps/"
	berth(t, "", "push", olmBundle(t, "e2e-operator", "1.0.0", s.operator.byDigest(), s.init.byTag(), s.operand.byDigest()), apps+"e2e-operator")
	berth(t, "", "push", helmChart(t, "web", s.other.repo, s.other.tag, s.img.byDigest()), apps+"web")
	berth(t, "", "push", kudoOperator(t, "kudo-app", s.kudoApp.byDigest()), apps+"kudo-app")
	berth(t, "", "push", plainManifests(t, s.plain.byDigest()), apps+"plain-app:1.0.0")
	berth(t, "", "push", filepath.Join(fixtures, "olm-community", "grafana-operator", "3.10.2"), apps+"grafana-operator")
	hostile := s.src.addr + "/hostile/"
	berth(t, "", "push", plainManifests(t, s.bad, s.odd.byDigest()), hostile+"odd:1.0.0")
	berth(t, "", "push", plainManifests(t, s.wide.byDigest()), hostile+"wide:1.0.0")
	berth(t, "", "push", filepath.Join(fixtures, "olm-community", "etcd", "0.9.4"), hostile+"etcd")
	for _, v := range siteVersions {
		waitUntil(t, s.src, v[0]+":"+v[1]+" indexed", func() bool {
			_, code := versionDoc(t, s.src, v[0], v[1])
			return code == 200
		})
	}
	return s
}

// siteVersions are the repository and version of every package of the image site.
var siteVersions = [][2]string{
	{"apps/e2e-operator", "1.0.0"}, {"apps/web", "0.1.0"}, {"apps/kudo-app", "1.0.0_0.1.0"}, {"apps/plain-app", "1.0.0"},
	{"apps/grafana-operator", "3.10.2"}, {"hostile/odd", "1.0.0"}, {"hostile/wide", "1.0.0"}, {"hostile/etcd", "0.9.4"},
}
