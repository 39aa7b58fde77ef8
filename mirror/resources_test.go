package mirror

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/olm"
)

// The patterns openshift/api's CRDs validate an ImageDigestMirrorSet's
// and ImageTagMirrorSet's source and mirrors with
// (config/v1/types_image_digest_mirror_set.go).
var (
	crdSourceRE = regexp.MustCompile(`^\*(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+$|^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$`)
	crdMirrorRE = regexp.MustCompile(`^((?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))+)?(?::[0-9]+)?)(?:(?:/[a-z0-9]+(?:(?:(?:[._]|__|[-]*)[a-z0-9]+)+)?)+)?$`)
)

// idmsDoc is an ImageDigestMirrorSet or ImageTagMirrorSet as openshift/api
// declares it, read strictly: a field it does not have fails the test.
type idmsDoc struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		ImageDigestMirrors []idmsEntry `json:"imageDigestMirrors,omitempty"`
		ImageTagMirrors    []idmsEntry `json:"imageTagMirrors,omitempty"`
	} `json:"spec"`
}

type idmsEntry struct {
	Source             string   `json:"source"`
	Mirrors            []string `json:"mirrors,omitempty"`
	MirrorSourcePolicy string   `json:"mirrorSourcePolicy,omitempty"`
}

// registriesConfDoc has the keys containers/image's sysregistriesv2 reads
// from a [[registry]] table; a key it does not know fails the test.
type registriesConfDoc struct {
	Registry []struct {
		Prefix             string `toml:"prefix"`
		Location           string `toml:"location"`
		Insecure           bool   `toml:"insecure"`
		Blocked            bool   `toml:"blocked"`
		MirrorByDigestOnly bool   `toml:"mirror-by-digest-only"`
		Mirror             []struct {
			Location       string `toml:"location"`
			Insecure       bool   `toml:"insecure"`
			PullFromMirror string `toml:"pull-from-mirror"`
		} `toml:"mirror"`
	} `toml:"registry"`
}

// hostsDoc has the keys containerd's remotes/docker/config reads from a
// hosts.toml.
type hostsDoc struct {
	Server string `toml:"server"`
	Host   map[string]struct {
		Capabilities []string `toml:"capabilities"`
		SkipVerify   *bool    `toml:"skip_verify"`
		OverridePath bool     `toml:"override_path"`
	} `toml:"host"`
}

// resourcesInput maps three repositories of quay.io, one of docker.io and
// a prefix of ghcr.io, with one image by tag, and two OLM namespaces. Its
// entries are out of order, and one mirror is given twice.
func resourcesInput(target string) ClusterResources {
	return ClusterResources{
		Target: target,
		Mirrors: []apiv1.ImageMirror{
			{Source: "quay.io/org/operator", Mirror: target + "/mirror/org/operator"},
			{Source: "docker.io/library/nginx", Mirror: target + "/mirror/library/nginx"},
			{Source: "quay.io/org/operand", Mirror: target + "/mirror/org/operand"},
			{Source: "ghcr.io/team", Mirror: target + "/gh/team"},
			{Source: "quay.io/operator-framework/opm", Mirror: target + "/mirror/operator-framework/opm"},
			{Source: "quay.io/org/operator", Mirror: target + "/mirror/org/operator"},
		},
		ByTag:         []string{"quay.io/org/operand", "ghcr.io/team/tool", "quay.io/org/operand"},
		OLMNamespaces: []string{"community", "team_b.x", "community"},
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// yamlDocsOf splits a YAML stream into its documents.
func yamlDocsOf(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(b, []byte("\n---\n")) {
		docs = append(docs, d)
	}
	return docs
}

func TestWriteClusterResources(t *testing.T) {
	const target = "mirror.site:5000"
	dir := filepath.Join(t.TempDir(), "resources")
	files, err := WriteClusterResources(dir, resourcesInput(target))
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range files {
		r, _ := filepath.Rel(dir, f)
		rel = append(rel, filepath.ToSlash(r))
	}
	wantFiles := []string{IDMSFile, ITMSFile, RegistriesConfFile,
		ContainerdHostsDir + "/docker.io/hosts.toml", ContainerdHostsDir + "/ghcr.io/hosts.toml", ContainerdHostsDir + "/quay.io/hosts.toml",
		"catalogsource-community.yaml", "clustercatalog-community.yaml", "catalogsource-team_b.x.yaml", "clustercatalog-team_b.x.yaml"}
	if !slices.Equal(rel, wantFiles) {
		t.Fatalf("files %q, want %q", rel, wantFiles)
	}

	t.Run("ImageDigestMirrorSet", func(t *testing.T) {
		checkMirrorSet(t, filepath.Join(dir, IDMSFile), "ImageDigestMirrorSet", []idmsEntry{
			{Source: "docker.io/library/nginx", Mirrors: []string{target + "/mirror/library/nginx"}},
			{Source: "ghcr.io/team", Mirrors: []string{target + "/gh/team"}},
			{Source: "quay.io/operator-framework/opm", Mirrors: []string{target + "/mirror/operator-framework/opm"}},
			{Source: "quay.io/org/operand", Mirrors: []string{target + "/mirror/org/operand"}},
			{Source: "quay.io/org/operator", Mirrors: []string{target + "/mirror/org/operator"}},
		})
	})

	t.Run("ImageTagMirrorSet", func(t *testing.T) {
		checkMirrorSet(t, filepath.Join(dir, ITMSFile), "ImageTagMirrorSet", []idmsEntry{
			{Source: "ghcr.io/team/tool", Mirrors: []string{target + "/gh/team/tool"}},
			{Source: "quay.io/org/operand", Mirrors: []string{target + "/mirror/org/operand"}},
		})
	})

	t.Run("registries.conf", func(t *testing.T) {
		var doc registriesConfDoc
		md, err := toml.Decode(string(readFile(t, filepath.Join(dir, RegistriesConfFile))), &doc)
		if err != nil {
			t.Fatal(err)
		}
		if u := md.Undecoded(); len(u) > 0 {
			t.Fatalf("keys containers/image does not know: %v", u)
		}
		type entry struct{ prefix, location, mirror, pull string }
		var got []entry
		for _, r := range doc.Registry {
			if len(r.Mirror) != 1 || r.Insecure || r.Blocked || r.MirrorByDigestOnly {
				t.Fatalf("registry %+v", r)
			}
			got = append(got, entry{r.Prefix, r.Location, r.Mirror[0].Location, r.Mirror[0].PullFromMirror})
		}
		want := []entry{
			{"docker.io/library/nginx", "docker.io/library/nginx", target + "/mirror/library/nginx", "digest-only"},
			{"ghcr.io/team", "ghcr.io/team", target + "/gh/team", "digest-only"},
			{"ghcr.io/team/tool", "ghcr.io/team/tool", target + "/gh/team/tool", "all"},
			{"quay.io/operator-framework/opm", "quay.io/operator-framework/opm", target + "/mirror/operator-framework/opm", "digest-only"},
			{"quay.io/org/operand", "quay.io/org/operand", target + "/mirror/org/operand", "all"},
			{"quay.io/org/operator", "quay.io/org/operator", target + "/mirror/org/operator", "digest-only"},
		}
		if !slices.Equal(got, want) {
			t.Fatalf("registries.conf\n got %+v\nwant %+v", got, want)
		}
	})

	t.Run("containerd", func(t *testing.T) {
		for host, want := range map[string]struct{ server, url string }{
			"docker.io": {"https://registry-1.docker.io", "https://" + target + "/v2/mirror"},
			"quay.io":   {"https://quay.io", "https://" + target + "/v2/mirror"},
			"ghcr.io":   {"https://ghcr.io", "https://" + target + "/v2/gh"},
		} {
			var doc hostsDoc
			md, err := toml.Decode(string(readFile(t, filepath.Join(dir, ContainerdHostsDir, host, "hosts.toml"))), &doc)
			if err != nil {
				t.Fatal(err)
			}
			if u := md.Undecoded(); len(u) > 0 {
				t.Fatalf("%s: keys containerd does not know: %v", host, u)
			}
			h, ok := doc.Host[want.url]
			if doc.Server != want.server || len(doc.Host) != 1 || !ok || !h.OverridePath || h.SkipVerify != nil ||
				!slices.Equal(h.Capabilities, []string{"pull", "resolve"}) {
				t.Errorf("%s: %+v, want server %s and one host %s with override_path", host, doc, want.server, want.url)
			}
		}
	})

	t.Run("OLM v0", func(t *testing.T) {
		for ns, name := range map[string]string{"community": "berth-community", "team_b.x": olm.CatalogObjectName("team_b.x")} {
			docs := yamlDocsOf(readFile(t, filepath.Join(dir, "catalogsource-"+ns+".yaml")))
			if len(docs) != 3 {
				t.Fatalf("%s: %d documents, want Deployment, Service, CatalogSource", ns, len(docs))
			}
			var d appsv1.Deployment
			if err := yaml.UnmarshalStrict(docs[0], &d); err != nil {
				t.Fatalf("%s: Deployment: %v", ns, err)
			}
			pod := d.Spec.Template.Spec
			if d.Kind != "Deployment" || d.Name != name || d.Namespace != OLMServeNamespace || len(pod.Containers) != 1 || len(pod.Volumes) != 1 ||
				pod.Volumes[0].Image == nil || d.Spec.Selector.MatchLabels["app"] != name || d.Spec.Template.Labels["app"] != name {
				t.Fatalf("%s: Deployment %+v", ns, d)
			}
			// The reference docs/olm.md names: HOST/<namespace>/olm/catalog:latest.
			if got, want := pod.Volumes[0].Image.Reference, target+"/"+ns+"/olm/catalog:latest"; got != want {
				t.Errorf("%s: catalog image %s, want %s", ns, got, want)
			}
			// opm is named under quay.io's mirror prefix, where docs/mirror.md says to copy it.
			if got, want := pod.Containers[0].Image, target+"/mirror/operator-framework/opm:v1.69.0"; got != want {
				t.Errorf("%s: opm image %s, want %s", ns, got, want)
			}
			var svc corev1.Service
			if err := yaml.UnmarshalStrict(docs[1], &svc); err != nil {
				t.Fatalf("%s: Service: %v", ns, err)
			}
			if svc.Kind != "Service" || svc.Name != name || svc.Spec.Selector["app"] != name || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 50051 {
				t.Errorf("%s: Service %+v", ns, svc)
			}
			var cs map[string]any
			if err := yaml.Unmarshal(docs[2], &cs); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
				"metadata": map[string]any{"name": name, "namespace": OLMServeNamespace},
				"spec":     map[string]any{"sourceType": "grpc", "address": name + ".olm.svc:50051", "displayName": "berth " + ns},
			}
			if !jsonEqual(cs, want) {
				t.Errorf("%s: CatalogSource %v, want %v", ns, cs, want)
			}
		}
	})

	t.Run("OLM v1", func(t *testing.T) {
		for ns, name := range map[string]string{"community": "berth-community", "team_b.x": olm.CatalogObjectName("team_b.x")} {
			var cc map[string]any
			if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "clustercatalog-"+ns+".yaml")), &cc); err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
				"metadata": map[string]any{"name": name},
				"spec": map[string]any{"source": map[string]any{"type": "Image",
					"image": map[string]any{"ref": target + "/" + ns + "/olm/catalog:latest", "pollIntervalMinutes": float64(1)}}},
			}
			if !jsonEqual(cc, want) {
				t.Errorf("%s: ClusterCatalog %v, want %v", ns, cc, want)
			}
		}
	})
}

func idmsEqual(a, b idmsEntry) bool {
	return a.Source == b.Source && a.MirrorSourcePolicy == b.MirrorSourcePolicy && slices.Equal(a.Mirrors, b.Mirrors)
}

func jsonEqual(a, b any) bool {
	ja, err1 := yaml.Marshal(a)
	jb, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// checkMirrorSet reads an ImageDigestMirrorSet or ImageTagMirrorSet
// strictly and compares its entries with want, then checks them against
// the CRD's patterns.
func checkMirrorSet(t *testing.T, file, kind string, want []idmsEntry) {
	t.Helper()
	var doc idmsDoc
	if err := yaml.UnmarshalStrict(readFile(t, file), &doc); err != nil {
		t.Fatal(err)
	}
	entries, other := doc.Spec.ImageDigestMirrors, doc.Spec.ImageTagMirrors
	if kind == "ImageTagMirrorSet" {
		entries, other = other, entries
	}
	if doc.APIVersion != "config.openshift.io/v1" || doc.Kind != kind || doc.Metadata.Name != MirrorSetName ||
		other != nil || !slices.EqualFunc(entries, want, idmsEqual) {
		t.Fatalf("%s: %+v, want %+v", kind, doc, want)
	}
	for _, e := range entries {
		if !crdSourceRE.MatchString(e.Source) {
			t.Errorf("source %q: the CRD refuses it", e.Source)
		}
		for _, m := range e.Mirrors {
			if !crdMirrorRE.MatchString(m) {
				t.Errorf("mirror %q: the CRD refuses it", m)
			}
		}
	}
}

// TestWriteClusterResourcesRegistrySource: a source may be a whole
// registry, with a more precise mapping for one of its repositories.
func TestWriteClusterResourcesRegistrySource(t *testing.T) {
	const target = "mirror.site:5000"
	dir := t.TempDir()
	_, err := WriteClusterResources(dir, ClusterResources{Target: target,
		Mirrors: []apiv1.ImageMirror{{Source: "quay.io/org/special", Mirror: target + "/mirror/org/special"}, {Source: "quay.io", Mirror: target + "/mirror"}},
		ByTag:   []string{"quay.io/org/tagged"}})
	if err != nil {
		t.Fatal(err)
	}
	checkMirrorSet(t, filepath.Join(dir, IDMSFile), "ImageDigestMirrorSet", []idmsEntry{
		{Source: "quay.io", Mirrors: []string{target + "/mirror"}},
		{Source: "quay.io/org/special", Mirrors: []string{target + "/mirror/org/special"}},
	})
	checkMirrorSet(t, filepath.Join(dir, ITMSFile), "ImageTagMirrorSet", []idmsEntry{
		{Source: "quay.io/org/tagged", Mirrors: []string{target + "/mirror/org/tagged"}},
	})
	var hosts hostsDoc
	if _, err := toml.Decode(string(readFile(t, filepath.Join(dir, ContainerdHostsDir, "quay.io", "hosts.toml"))), &hosts); err != nil {
		t.Fatal(err)
	}
	if _, ok := hosts.Host["https://"+target+"/v2/mirror"]; !ok || len(hosts.Host) != 1 {
		t.Errorf("containerd hosts %+v, want https://%s/v2/mirror", hosts.Host, target)
	}
}

// TestWriteClusterResourcesDeterministic: the same resources given in
// another order write the same bytes, over the files of an earlier run,
// which leaves no temporary file behind.
func TestWriteClusterResourcesDeterministic(t *testing.T) {
	dir := t.TempDir()
	in := resourcesInput("localhost:5000")
	first, err := WriteClusterResources(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{}
	for _, f := range first {
		before[f] = readFile(t, f)
		if err := os.WriteFile(f, []byte("stale"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Reverse(in.Mirrors)
	slices.Reverse(in.ByTag)
	slices.Reverse(in.OLMNamespaces)
	second, err := WriteClusterResources(dir, in)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(first, second) {
		t.Fatalf("files %q, then %q", first, second)
	}
	for _, f := range second {
		if got := readFile(t, f); !bytes.Equal(got, before[f]) {
			t.Errorf("%s differs:\n%s\nthen\n%s", f, before[f], got)
		}
	}
	err = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(filepath.Base(path), ".") {
			t.Errorf("left behind: %s", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestWriteClusterResourcesRefuses: every bad entry is refused with an
// error naming it, before anything is written.
func TestWriteClusterResourcesRefuses(t *testing.T) {
	const target = "mirror.site:5000"
	ok := apiv1.ImageMirror{Source: "quay.io/org/img", Mirror: target + "/mirror/org/img"}
	for _, tc := range []struct {
		name   string
		target string
		m      []apiv1.ImageMirror
		byTag  []string
		ns     []string
		want   []string
	}{
		{name: "empty target", target: "", want: []string{`target ""`, "host[:port]"}},
		{name: "target without a dot or port", target: "mirror", want: []string{`target "mirror"`}},
		{name: "target with a path", target: "mirror.site/x", want: []string{`target "mirror.site/x"`}},
		{name: "target with a newline", target: "mirror.site\n[x]", want: []string{"target"}},
		{name: "empty source", m: []apiv1.ImageMirror{ok, {Source: "", Mirror: target + "/m/x"}}, want: []string{"mirrors[1]: source", "not a repository"}},
		{name: "source with a tag", m: []apiv1.ImageMirror{{Source: "quay.io/org/img:1", Mirror: target + "/m/org/img"}}, want: []string{"mirrors[0]: source", "without tag or digest"}},
		{name: "source with a digest", m: []apiv1.ImageMirror{{Source: "quay.io/org/img@sha256:" + strings.Repeat("a", 64), Mirror: target + "/m/org/img"}}, want: []string{"mirrors[0]: source", "without tag or digest"}},
		{name: "source not normalised", m: []apiv1.ImageMirror{{Source: "nginx", Mirror: target + "/m/library/nginx"}}, want: []string{"mirrors[0]: source", "docker.io/library/nginx"}},
		{name: "source that is a name without a host", m: []apiv1.ImageMirror{{Source: "mirror", Mirror: target + "/m"}}, want: []string{"mirrors[0]: source", "docker.io/library/mirror"}},
		{name: "registry source and a repository under another prefix", m: []apiv1.ImageMirror{{Source: "quay.io", Mirror: target + "/m"}, ok}, want: []string{"mirrors[1]", "two prefixes", "quay.io -> " + target + "/m"}},
		{name: "repository mirrored to the bare target", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: target}}, want: []string{"mirrors[0]", "does not keep the repository's path (org/img)"}},
		{name: "by tag a registry", m: []apiv1.ImageMirror{{Source: "quay.io", Mirror: target + "/m"}}, byTag: []string{"quay.io"}, want: []string{"byTag[0]", "want a repository"}},
		{name: "source with a quote and a newline", m: []apiv1.ImageMirror{{Source: "quay.io/org/img\"\n[[registry]]\nprefix = \"x", Mirror: target + "/m/org/img"}}, want: []string{"mirrors[0]: source", "not a repository"}},
		{name: "source in YAML flow", m: []apiv1.ImageMirror{{Source: "quay.io/org/img\n  mirrors: [evil.io/x]", Mirror: target + "/m/org/img"}}, want: []string{"mirrors[0]: source"}},
		{name: "upper-case path", m: []apiv1.ImageMirror{{Source: "quay.io/Org/img", Mirror: target + "/m/Org/img"}}, want: []string{"mirrors[0]: source"}},
		{name: "empty mirror", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: ""}}, want: []string{"mirrors[0]: mirror", "not a repository"}},
		{name: "mirror with a newline", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: target + "/m/org/img\"\nx = 1"}}, want: []string{"mirrors[0]: mirror"}},
		{name: "mirror with a digest", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: target + "/m/org/img@sha256:" + strings.Repeat("a", 64)}}, want: []string{"mirrors[0]: mirror", "without tag or digest"}},
		{name: "mirror elsewhere", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: "other.site:5000/m/org/img"}}, want: []string{"mirrors[0]", "not on the target " + target}},
		{name: "two mirrors for a source", m: []apiv1.ImageMirror{ok, {Source: ok.Source, Mirror: target + "/other/org/img"}}, want: []string{"mirrors[1]", "two mirrors", ok.Mirror, target + "/other/org/img"}},
		{name: "mirror that does not keep the path", m: []apiv1.ImageMirror{{Source: "quay.io/org/img", Mirror: target + "/flat-img"}}, want: []string{"mirrors[0]", "does not keep the repository's path (org/img)"}},
		{name: "two prefixes for a registry", m: []apiv1.ImageMirror{ok, {Source: "quay.io/org/other", Mirror: target + "/q/org/other"}}, want: []string{"mirrors[1]", "two prefixes", "quay.io", "--image-prefix"}},
		{name: "by tag without mirror", m: []apiv1.ImageMirror{ok}, byTag: []string{"ghcr.io/x/y"}, want: []string{"byTag[0]", "no mirror covers ghcr.io/x/y"}},
		{name: "by tag hostile", m: []apiv1.ImageMirror{ok}, byTag: []string{"quay.io/org/img\"\n"}, want: []string{"byTag[0]", "not a repository"}},
		{name: "by tag with a tag", m: []apiv1.ImageMirror{ok}, byTag: []string{"quay.io/org/img:latest"}, want: []string{"byTag[0]", "without tag"}},
		{name: "bad namespace", ns: []string{"ok", "Team"}, want: []string{"olmNamespaces[1]", "Team"}},
		{name: "namespace with a path", ns: []string{"../x"}, want: []string{"olmNamespaces[0]"}},
		{name: "empty namespace", ns: []string{""}, want: []string{"olmNamespaces[0]", "empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tgt := tc.target
			if tgt == "" && !strings.HasPrefix(tc.name, "empty target") {
				tgt = target
			}
			dir := filepath.Join(t.TempDir(), "out")
			files, err := WriteClusterResources(dir, ClusterResources{Target: tgt, Mirrors: tc.m, ByTag: tc.byTag, OLMNamespaces: tc.ns})
			if err == nil {
				t.Fatalf("accepted, wrote %q", files)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("wrote into %s although refused", dir)
			}
		})
	}
}

// TestOLMObjectName: every namespace gets a valid DNS-1035 label, its own.
func TestOLMObjectName(t *testing.T) {
	long := strings.Repeat("a", 128)
	names := map[string]string{}
	for _, ns := range []string{"community", "a-b", "a_b", "a.b", "0start", long, long[:127] + "b", strings.Repeat("a.", 63) + "a"} {
		name := olm.CatalogObjectName(ns)
		if errs := validation.IsDNS1035Label(name); len(errs) > 0 {
			t.Errorf("%s: %q: %v", ns, name, errs)
		}
		if other, dup := names[name]; dup {
			t.Errorf("%s and %s are both %q", other, ns, name)
		}
		names[name] = ns
		if olm.CatalogObjectName(ns) != name {
			t.Errorf("%s: not deterministic", ns)
		}
	}
	if got := olm.CatalogObjectName("community"); got != "berth-community" {
		t.Errorf("community: %q, want the web UI's berth-community", got)
	}
}
