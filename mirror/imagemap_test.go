package mirror

import (
	"slices"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestParseImagePrefixes(t *testing.T) {
	p, err := ParseImagePrefixes([]string{"127.0.0.1:5000/site/up", "quay.io=quay", "docker.io=hub/lib"}, "127.0.0.1:5000")
	if err != nil {
		t.Fatal(err)
	}
	for src, want := range map[[2]string]string{
		{"quay.io", "org/img"}:         "quay/org/img",
		{"docker.io", "library/nginx"}: "hub/lib/library/nginx",
		{"ghcr.io", "org/img"}:         "site/up/org/img",
	} {
		if got := p.target(src[0], src[1]); got != want {
			t.Errorf("%s/%s goes to %s, want %s", src[0], src[1], got, want)
		}
	}
	if got := (ImagePrefixes{}).target("quay.io", "org/img"); got != "mirror/org/img" {
		t.Errorf("with no prefix: %s, want mirror/org/img", got)
	}
}

func TestParseImagePrefixesRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{""}, `--image-prefix "": PREFIX`},
		{[]string{"/mirror"}, `--image-prefix "/mirror": PREFIX`},
		{[]string{"mirror/"}, `--image-prefix "mirror/": PREFIX`},
		{[]string{"Mirror"}, `--image-prefix "Mirror": PREFIX`},
		{[]string{"a//b"}, `--image-prefix "a//b": PREFIX`},
		{[]string{"other.site:5000/mirror"}, `--image-prefix "other.site:5000/mirror": other.site:5000 names a registry, but images go to target.site:5000`},
		{[]string{"quay.io="}, `--image-prefix "quay.io=": PREFIX`},
		{[]string{"=mirror"}, `--image-prefix "=mirror": REGISTRY`},
		{[]string{"bad host=mirror"}, `--image-prefix "bad host=mirror": REGISTRY "bad host" is not a registry`},
		{[]string{"quay.io=a=b"}, `--image-prefix "quay.io=a=b": PREFIX`},
		{[]string{"a", "b"}, `--image-prefix "b": a prefix for every registry is given already (a)`},
		{[]string{"quay.io=a", "quay.io=b"}, `--image-prefix "quay.io=b": quay.io has a prefix already (a)`},
	} {
		_, err := ParseImagePrefixes(tc.args, "target.site:5000")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
}

func TestParseRegistryMapRefuses(t *testing.T) {
	m, err := ParseRegistryMap([]string{"quay.io=127.0.0.1:5001", "ghcr.io=mirror.internal/ghcr"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range [][4]string{
		{"quay.io", "org/img", "127.0.0.1:5001", "org/img"},
		{"ghcr.io", "org/img", "mirror.internal", "ghcr/org/img"},
		{"docker.io", "library/nginx", "registry-1.docker.io", "library/nginx"},
		{"gcr.io", "org/img", "gcr.io", "org/img"},
	} {
		if host, path := m.readFrom(tc[0], tc[1]); host != tc[2] || path != tc[3] {
			t.Errorf("%s/%s is read from %s/%s, want %s/%s", tc[0], tc[1], host, path, tc[2], tc[3])
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"quay.io"}, `--registry-map "quay.io": want FROM=TO`},
		{[]string{"=127.0.0.1:5001"}, `--registry-map "=127.0.0.1:5001": want FROM=TO`},
		{[]string{"quay.io="}, `--registry-map "quay.io=": want FROM=TO`},
		{[]string{"quay.io/org=127.0.0.1:5001"}, `--registry-map "quay.io/org=127.0.0.1:5001": FROM "quay.io/org" is not a registry`},
		{[]string{"quay.io=http://127.0.0.1:5001"}, `--registry-map "quay.io=http://127.0.0.1:5001": TO "http:" is not a registry`},
		{[]string{"quay.io=bad host"}, `TO "bad host" is not a registry`},
		{[]string{"quay.io=127.0.0.1:5001/Up"}, `TO's path "Up" is not a repository path`},
		{[]string{"quay.io=a.io", "quay.io=b.io"}, `--registry-map "quay.io=b.io": quay.io is mapped already, to a.io`},
	} {
		_, err := ParseRegistryMap(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one with %q", tc.args, err, tc.want)
		}
	}
	if _, err := ParsePlatforms([]string{"linux/amd64,linux/arm64/v8"}); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{"linux", "linux/", "/amd64", "linux/arm/v7/x", "linux/amd64,"} {
		if _, err := ParsePlatforms([]string{bad}); err == nil || !strings.Contains(err.Error(), "--platform") {
			t.Errorf("--platform %q: error %v", bad, err)
		}
	}
}

func TestMapImagesRefusesCollisions(t *testing.T) {
	img := func(repo string) Image { return Image{Repository: repo, Reference: repo + ":1"} }
	m := &Manifest{
		Versions: []Version{{Repository: "charts/hello"}},
		Images:   []Image{img("quay.io/org/img"), img("ghcr.io/org/img"), img("gcr.io/hello"), {Reference: "@@", Problem: "bad"}},
	}
	for _, tc := range []struct {
		prefixes ImagePrefixes
		want     string
	}{
		{ImagePrefixes{}, "images quay.io/org/img and ghcr.io/org/img would both go to t:5000/mirror/org/img; give each registry its own prefix: --image-prefix quay.io=mirror/quay.io --image-prefix ghcr.io=mirror/ghcr.io"},
		{ImagePrefixes{ByRegistry: map[string]string{"quay.io": "up", "ghcr.io": "up"}}, "would both go to t:5000/up/org/img"},
		{ImagePrefixes{Default: "x", ByRegistry: map[string]string{"ghcr.io": "g", "gcr.io": "charts"}}, "image gcr.io/hello would go to t:5000/charts/hello, the repository of a package"},
		{ImagePrefixes{Default: strings.Repeat("a", 250)}, "give a shorter --image-prefix"},
	} {
		_, err := mapImages(m, tc.prefixes, "t:5000")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one with %q", tc.prefixes, err, tc.want)
		}
	}
	got, err := mapImages(m, ImagePrefixes{ByRegistry: map[string]string{"quay.io": "q", "ghcr.io": "g"}}, "t:5000")
	if err != nil {
		t.Fatal(err)
	}
	want := []apiv1.ImageMirror{{Source: "gcr.io/hello", Mirror: "t:5000/mirror/hello"},
		{Source: "ghcr.io/org/img", Mirror: "t:5000/g/org/img"}, {Source: "quay.io/org/img", Mirror: "t:5000/q/org/img"}}
	if mirrors := got.mirrors("t:5000"); !slices.Equal(mirrors, want) {
		t.Errorf("mirrors %+v, want %+v", mirrors, want)
	}
}

func TestResourcesFor(t *testing.T) {
	m := &Manifest{
		Versions: []Version{{Repository: "ops/etcd", Format: "olm"}, {Repository: "ops/redis", Format: "olm"}, {Repository: "charts/hello", Format: "helm"}},
		Images: []Image{{Repository: "quay.io/org/a", Tag: "1"}, {Repository: "quay.io/org/a", Tag: "2"}, {Repository: "quay.io/org/b"},
			{Repository: "quay.io/org/c", Tag: "1", Problem: "missing"}},
	}
	mirrors := []apiv1.ImageMirror{{Source: "quay.io/org/a", Mirror: "t/mirror/org/a"}}
	r := resourcesFor(m, "t", mirrors)
	if r.Target != "t" || !slices.Equal(r.Mirrors, mirrors) || !slices.Equal(r.ByTag, []string{"quay.io/org/a"}) || !slices.Equal(r.OLMNamespaces, []string{"ops"}) {
		t.Errorf("resources %+v", r)
	}
}
