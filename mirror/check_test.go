package mirror

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/mirror/mirrortest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
)

// checkFakeBerth is a client of a mirrortest.NewBerth.
func checkFakeBerth(t *testing.T, packages []*apiv1.Package, installable map[string]*apiv1.Installable) *client.Catalog {
	t.Helper()
	cat, err := client.NewCatalog(mirrortest.NewBerth(t, packages, installable), client.Options{Credentials: credentials.NewMemoryStore(), HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func TestCheckInstall(t *testing.T) {
	const far = "far.site:5000"
	etcd := "quay.io/coreos/etcd@sha256:" + strings.Repeat("a", 64)
	web := "docker.io/library/nginx:1.27"
	cat := checkFakeBerth(t,
		[]*apiv1.Package{mirrortest.Package("olm", "etcd", pkgformat.OLM, "0.9.4", "0.9.2"), mirrortest.Package("charts", "web", pkgformat.Helm, "1.0.0", "2.0.0")},
		map[string]*apiv1.Installable{
			"olm/etcd@0.9.4": {Namespace: "olm", Name: "etcd", Version: "0.9.4", Installable: true, Verified: true,
				Images: []apiv1.ImageCheck{{Reference: etcd, Mirror: far + "/mirror/coreos/etcd@sha256:" + strings.Repeat("a", 64), Present: true}}},
			"olm/etcd@0.9.2": {Namespace: "olm", Name: "etcd", Version: "0.9.2", Installable: false,
				Images:   []apiv1.ImageCheck{{Reference: etcd, Mirror: far + "/mirror/coreos/etcd@sha256:" + strings.Repeat("a", 64), Reason: "manifest unknown"}},
				Problems: []string{"image " + etcd + ": not at its mirror: manifest unknown"}},
			// An answer that contradicts itself, for another version than asked.
			"charts/web@1.0.0": {Namespace: "other", Name: "thing", Version: "9.9.9", Installable: true,
				Images: []apiv1.ImageCheck{{Reference: web, Mirror: far + "/mirror/library/nginx:1.27"}}},
		})
	sel, err := ParseSelection([]byte("packages:\n  - namespace: olm\n  - namespace: charts\n"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := CheckInstall(context.Background(), CheckOptions{Catalog: cat, Selection: sel})
	if err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		version     string
		installable bool
		problems    []string
	}
	var got []verdict
	for _, v := range rep.Versions {
		got = append(got, verdict{v.Namespace + "/" + v.Name + "@" + v.Version, v.Installable, v.Problems})
	}
	want := []verdict{
		{"charts/web@2.0.0", false, []string{"the far berth cannot say: charts/web: not found: version not found"}},
		{"charts/web@1.0.0", false, []string{"image " + web + " (at " + far + "/mirror/library/nginx:1.27): not present: the far berth says so"}},
		{"olm/etcd@0.9.4", true, nil},
		{"olm/etcd@0.9.2", false, []string{"image " + etcd + ": not at its mirror: manifest unknown"}},
	}
	if !slices.EqualFunc(got, want, func(a, b verdict) bool {
		return a.version == b.version && a.installable == b.installable && slices.Equal(a.problems, b.problems)
	}) {
		t.Fatalf("verdicts\n got %+v\nwant %+v", got, want)
	}
	if rep.Installable != 1 || rep.NotInstallable != 3 {
		t.Errorf("counts %d installable, %d not; want 1 and 3", rep.Installable, rep.NotInstallable)
	}
}

// TestCheckInstallNotBerth: a registry that is not a berth, or something
// in front of it that answers other documents, is said to be so.
func TestCheckInstallNotBerth(t *testing.T) {
	sel := &Selection{Packages: []Rule{{Namespace: "olm"}}}
	for name, h := range map[string]http.HandlerFunc{
		"distribution": func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) },
		"a web page": func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>login</html>"))
		},
	} {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			cat, err := client.NewCatalog(srv.URL, client.Options{Credentials: credentials.NewMemoryStore(), HTTPClient: &http.Client{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = CheckInstall(context.Background(), CheckOptions{Catalog: cat, Selection: sel})
			if !errors.Is(err, ErrNotBerth) || !strings.HasPrefix(err.Error(), "FAR does not answer berth's catalog API; mirror check needs a berth (") {
				t.Errorf("error %v, want ErrNotBerth with the catalog's error", err)
			}
		})
	}
	// A berth whose answer to a later request is a 404 of its own (no such
	// upgrade path) is a berth.
	etcd := mirrortest.Package("olm", "etcd", pkgformat.OLM, "1.1.0", "1.0.0")
	etcd.Channels = []apiv1.Channel{{Name: "alpha", Head: "1.1.0", Versions: []string{"1.1.0", "1.0.0"}}}
	cat := checkFakeBerth(t, []*apiv1.Package{etcd}, nil)
	path := &Selection{Packages: []Rule{{Repository: "olm/etcd", Channel: "alpha", From: "1.0.0"}}}
	if _, err := CheckInstall(context.Background(), CheckOptions{Catalog: cat, Selection: path}); err == nil || errors.Is(err, ErrNotBerth) {
		t.Errorf("a berth's later 404: %v, want its error, not ErrNotBerth", err)
	}
	// A real registry.
	host := registrytest.New(t, nil)
	reg, err := invClient(t).Catalog(host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := CheckInstall(context.Background(), CheckOptions{Catalog: reg, Selection: sel}); !errors.Is(err, ErrNotBerth) {
		t.Errorf("against distribution's registry: %v, want ErrNotBerth", err)
	}
}

// TestCheckInstallPolicy verifies, against a real registry standing in for
// the far site, each image's signatures at its mirror with the rule of its
// source repository.
func TestCheckInstallPolicy(t *testing.T) {
	ctx := context.Background()
	host := registrytest.New(t, nil)
	c := invClient(t)
	p := &invPusher{t: t, c: c, host: host, want: map[string]map[digest.Digest]bool{}}
	trusted, other := signingtest.NewKeyPair(t, ""), signingtest.NewKeyPair(t, "")
	image := func(repo, tag string, signer *signing.Signer) digest.Digest {
		d := p.manifest(repo, tag, p.blob(repo, "{}"), nil, "", p.blob(repo, repo)).Digest
		if signer != nil {
			if err := signing.Sign(ctx, signer, host+"/"+repo+"@"+d.String(), signing.SignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		return d
	}
	signed := image("mirror/org/signed", "", trusted.Signer)
	image("mirror/org/tagged", "v1", trusted.Signer)
	unsigned := image("mirror/org/unsigned", "", nil)
	foreign := image("mirror/org/foreign", "", other.Signer)
	uncovered := image("gh/x/y", "", nil)
	check := func(src, mirrorRepo string, d digest.Digest) apiv1.ImageCheck {
		return apiv1.ImageCheck{Reference: src + "@" + d.String(), Mirror: host + "/" + mirrorRepo + "@" + d.String(), Present: true}
	}
	inst := &apiv1.Installable{Installable: true, Images: []apiv1.ImageCheck{
		check("quay.io/org/signed", "mirror/org/signed", signed),
		{Reference: "quay.io/org/tagged:v1", Mirror: host + "/mirror/org/tagged:v1", Present: true},
		check("quay.io/org/unsigned", "mirror/org/unsigned", unsigned),
		check("quay.io/org/foreign", "mirror/org/foreign", foreign),
		check("ghcr.io/x/y", "gh/x/y", uncovered),
	}}
	cat := checkFakeBerth(t, []*apiv1.Package{mirrortest.Package("olm", "etcd", pkgformat.OLM, "1.0.0")}, map[string]*apiv1.Installable{"olm/etcd@1.0.0": inst})
	policy := signing.NewPolicyOf(signing.Rule{Images: []string{"quay.io/org/*"}, Keys: []signing.Key{trusted.Key}, Require: true})
	sel := &Selection{Packages: []Rule{{Namespace: "olm"}}}
	rep, err := CheckInstall(ctx, CheckOptions{Catalog: cat, Selection: sel, Policy: policy, Fetchers: c})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Versions) != 1 {
		t.Fatalf("versions %+v", rep.Versions)
	}
	v := rep.Versions[0]
	type seen struct{ signed, verified bool }
	var got []seen
	for _, img := range v.Images {
		got = append(got, seen{img.Signed, img.Verified})
	}
	if want := []seen{{true, true}, {true, true}, {false, false}, {true, false}, {false, false}}; !slices.Equal(got, want) {
		t.Errorf("signed, verified: got %v, want %v", got, want)
	}
	wantProblems := []string{
		"image " + inst.Images[2].Reference + " (at " + inst.Images[2].Mirror + "): signature not verified by the trust policy: no signature",
		"image " + inst.Images[3].Reference + " (at " + inst.Images[3].Mirror + "): signature not verified by the trust policy: " + signingtest.Untrusted("mirror/org/foreign", trusted.Key),
	}
	if v.Installable || !slices.Equal(v.Problems, wantProblems) {
		t.Errorf("installable %v, problems\n%q\nwant not installable, problems\n%q", v.Installable, v.Problems, wantProblems)
	}
	if _, err := CheckInstall(ctx, CheckOptions{Catalog: cat, Selection: sel, Policy: policy}); err == nil || !strings.Contains(err.Error(), "Fetchers") {
		t.Errorf("a policy without Fetchers: %v", err)
	}
}
