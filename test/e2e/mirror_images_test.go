package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// mirrorPrefix is the --image-prefix of the imports: quay.io/org/img
// lives at TARGET/mirror/org/img.
const mirrorPrefix = "mirror"

// keptPlatforms are the --platform of the export of namespace apps; the
// operator's index also has linux/s390x, which stays behind.
var keptPlatforms = []string{"linux/amd64", "linux/arm64"}

// TestMirrorImages: the images of an OLM bundle, a Helm chart, a KUDO
// operator, a plain package and a shared OLM fixture, pushed multi-arch to
// stand-ins of quay.io and ghcr.io and some signed by the real cosign,
// travel with their packages. berth mirror export reads them through
// --registry-map under their public names, keeping two platforms; berth
// mirror import puts them under a prefix of a far berth with auth on (which
// then names the mirror locations, finds the packages by image and answers
// installable) and of distribution's registry. Every image pulls by digest
// from its mirror location, its dropped platform does not, a tag moved
// upstream after the export names the exported digest, cosign verifies
// offline, the ImageDigestMirrorSet maps every source repository, and
// berth mirror check passes, then fails naming an image deleted at the far
// side. The hostile namespace: a reference with @@, an index of 200
// platforms and a digest nobody holds.
func TestMirrorImages(t *testing.T) {
	site := startImageSite(t)
	work := t.TempDir()
	archive := filepath.Join(work, "apps")
	exp := berth(t, work, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "apps", "-o", archive,
		"--platform", strings.Join(keptPlatforms, ","), "--format", "json"}, site.up.registryMap()...)...)
	if s := summaryOf(t, exp.stdout); s.Versions != 5 || len(s.Failed) != 0 {
		t.Fatalf("export of apps: %+v\n%s", s, exp.stderr)
	}
	// The tag ghcr.io/org/other:1.0 moves upstream after the export.
	moved := site.up.pushImage(t, site.other.repo, site.other.tag, "linux/amd64")
	if moved.digest == site.other.digest {
		t.Fatalf("the tag %s did not move", site.other.byTag())
	}

	far := startImageMirrorBerth(t, site.kp)
	admin := far.users["admin"]
	admin.login(t, berthBin, "login")
	resources := filepath.Join(work, "resources")
	imp := summaryOf(t, admin.must(t, berthBin, "mirror", "import", archive, far.addr, "--image-prefix", mirrorPrefix,
		"--resources", resources, "--format", "json").stdout)
	if imp.Versions != 5 || len(imp.Failed) != 0 || len(imp.Quarantined) != 0 {
		t.Fatalf("import into the far berth: %+v", imp)
	}
	appsImages := site.appsImages()
	if len(site.operator.platforms) <= len(keptPlatforms) {
		t.Fatalf("%s has %d platforms: nothing to filter", site.operator.repo, len(site.operator.platforms))
	}
	keep := func(_ image, platform string) bool { return slices.Contains(keptPlatforms, platform) }
	checkMirrored(t, admin.run, far.addr, appsImages, keep)
	if got := craneDigest(t, admin.run, mirrorRef(far.addr, site.other.byTag())); got != site.other.digest {
		t.Errorf("%s at the mirror is %s, want the exported %s (the tag moved upstream to %s)", site.other.byTag(), got, site.other.digest, moved.digest)
	}
	for _, img := range []image{site.operator, site.operand, site.plain} {
		admin.must(t, cosignBin, "verify", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline", mirrorRef(far.addr, img.byDigest()))
	}
	admin.must(t, cosignBin, "verify-attestation", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline",
		"--type", "slsaprovenance", mirrorRef(far.addr, site.operator.byDigest()))
	checkDigestMirrorSet(t, resources, far.addr, appsImages)
	checkFarCatalog(t, far, site)

	check := []string{"mirror", "check", "--namespace", "apps", "--registry", far.addr, "--format", "json"}
	if r := admin.run(t, berthBin, check...); r.code != 0 {
		t.Errorf("mirror check after the import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	admin.must(t, craneBin, "delete", mirrorRef(far.addr, site.img.byDigest()))
	r := admin.run(t, berthBin, check...)
	if r.code != 1 || !strings.Contains(r.stdout+r.stderr, site.img.repo) {
		t.Errorf("mirror check after %s was deleted at the mirror: exit %d, want 1 naming it\n%s%s", site.img.byDigest(), r.code, r.stdout, r.stderr)
	}
	var inst apiv1.Installable
	if h := far.api(t, admin.creds(), http.MethodGet, "/api/v1/packages/apps/web/versions/0.1.0/installable"); h.status != http.StatusOK ||
		json.Unmarshal(h.body, &inst) != nil || inst.Installable || !strings.Contains(strings.Join(inst.Problems, "\n"), site.img.repo) {
		t.Errorf("installable of apps/web after %s was deleted at the mirror: %s", site.img.byDigest(), h)
	}

	// Into distribution's registry, which keeps indexes whose platforms
	// were filtered out.
	reg := startUpstreamRegistry(t, "validation:\n  manifests:\n    indexes:\n      platforms: none\n")
	plain := summaryOf(t, berth(t, work, "mirror", "import", archive, reg.addr, "--image-prefix", mirrorPrefix,
		"--resources", filepath.Join(work, "resources-registry"), "--format", "json").stdout)
	if plain.Versions != 5 || len(plain.Failed) != 0 {
		t.Fatalf("import into distribution's registry: %+v", plain)
	}
	checkMirrored(t, anonymously, reg.addr, appsImages, keep)
	mustSucceed(t, anonymously, cosignBin, "verify", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline", mirrorRef(reg.addr, site.operator.byDigest()))

	mirrorHostileImages(t, site, work)
}

// appsImages are the images of namespace apps, each with the reference its package names.
func (s *imageSite) appsImages() []siteImage {
	return []siteImage{
		{s.operator, s.operator.byDigest()}, {s.operand, s.operand.byDigest()}, {s.init, s.init.byTag()},
		{s.other, s.other.byTag()}, {s.img, s.img.byDigest()}, {s.kudoApp, s.kudoApp.byDigest()},
		{s.plain, s.plain.byDigest()}, {s.grafana, s.grafana.byTag()},
	}
}

// siteImage is an image and the reference a package names it by.
type siteImage struct {
	image
	ref string
}

// mirrorRef is where the public reference (or repository, or registry
// host) ref lives at target under mirrorPrefix.
func mirrorRef(target, ref string) string {
	if _, rest, ok := strings.Cut(ref, "/"); ok {
		return target + "/" + mirrorPrefix + "/" + rest
	}
	return target + "/" + mirrorPrefix
}

// runner runs a tool as some caller: an account of the far berth
// (account.run), or anonymously.
type runner func(t *testing.T, bin string, args ...string) result

func anonymously(t *testing.T, bin string, args ...string) result {
	t.Helper()
	return run(t, "", bin, args...)
}

// mustSucceed runs bin with as and fails the test unless it succeeds.
func mustSucceed(t *testing.T, as runner, bin string, args ...string) result {
	t.Helper()
	r := as(t, bin, args...)
	if r.code != 0 {
		t.Fatalf("%s %s: exit %d\n%s%s", filepath.Base(bin), strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// craneDigest is the digest of ref, read by crane.
func craneDigest(t *testing.T, as runner, ref string) string {
	t.Helper()
	return strings.TrimSpace(mustSucceed(t, as, craneBin, "digest", ref).stdout)
}

// checkMirrored checks that every image pulls by digest from its mirror
// location at target, with the manifest of each platform keep keeps, and
// without the others.
func checkMirrored(t *testing.T, as runner, target string, images []siteImage, keep func(img image, platform string) bool) {
	t.Helper()
	for _, img := range images {
		at := mirrorRef(target, img.byDigest())
		if got := craneDigest(t, as, at); got != img.digest {
			t.Errorf("%s: digest %s, want %s", at, got, img.digest)
		}
		if len(img.platforms) == 1 {
			continue // the image is its one platform's manifest
		}
		for i, p := range slices.Sorted(maps.Keys(img.platforms)) {
			if i > 2 && i < len(img.platforms)-1 {
				continue // of a wide index, its first three platforms and its last
			}
			d := img.platforms[p]
			r := as(t, craneBin, "manifest", mirrorRef(target, img.repo+"@"+d))
			if kept := keep(img.image, p); kept != (r.code == 0) {
				t.Errorf("%s's %s manifest %s at the mirror: exit %d, want it there: %v\n%s", img.repo, p, d, r.code, kept, r.stderr)
			}
		}
	}
}

// digestMirrorSet is the part of an ImageDigestMirrorSet or ImageTagMirrorSet the test reads.
type digestMirrorSet struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		ImageDigestMirrors []sourceMirrors `json:"imageDigestMirrors"`
		ImageTagMirrors    []sourceMirrors `json:"imageTagMirrors"`
	} `json:"spec"`
}

type sourceMirrors struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// checkDigestMirrorSet checks the mirror sets the import wrote: the
// ImageDigestMirrorSet maps every source repository of images onto its
// mirror at target, and the ImageTagMirrorSet those some package names by
// tag. An entry may name a repository or a prefix of repositories (the
// longest prefix by whole path components maps a repository), and each
// maps its source exactly onto the same path under target/mirrorPrefix.
func checkDigestMirrorSet(t *testing.T, resources, target string, images []siteImage) {
	t.Helper()
	var all, byTag []string
	for _, img := range images {
		all = append(all, img.repo)
		if !strings.Contains(img.ref, "@") {
			byTag = append(byTag, img.repo)
		}
	}
	for _, f := range []struct {
		file, kind string
		repos      []string
	}{{"imagedigestmirrorset.yaml", "ImageDigestMirrorSet", all}, {"imagetagmirrorset.yaml", "ImageTagMirrorSet", byTag}} {
		var set digestMirrorSet
		if err := yaml.Unmarshal(readFile(t, filepath.Join(resources, f.file)), &set); err != nil {
			t.Fatalf("%s: %v", f.file, err)
		}
		entries := append(set.Spec.ImageDigestMirrors, set.Spec.ImageTagMirrors...)
		if set.Kind != f.kind || set.APIVersion != "config.openshift.io/v1" || len(entries) == 0 {
			t.Errorf("%s: %s %s with %d entries, want a config.openshift.io/v1 %s", f.file, set.APIVersion, set.Kind, len(entries), f.kind)
		}
		for _, m := range entries {
			if want := mirrorRef(target, m.Source); !slices.Equal(m.Mirrors, []string{want}) {
				t.Errorf("%s: %s has mirrors %v, want [%s]", f.file, m.Source, m.Mirrors, want)
			}
		}
		for _, repo := range f.repos {
			if got, want := mirroredAt(entries, repo), mirrorRef(target, repo); got != want {
				t.Errorf("%s maps %s to %q, want %s", f.file, repo, got, want)
			}
		}
	}
}

// mirroredAt is where the entries send repo: the mirror of the longest
// source that is repo or a prefix of it by whole path components, followed
// by the rest of repo's path; "" when none covers it.
func mirroredAt(entries []sourceMirrors, repo string) string {
	best := -1
	for i, m := range entries {
		if (repo == m.Source || strings.HasPrefix(repo, m.Source+"/")) && len(m.Mirrors) > 0 && (best < 0 || len(m.Source) > len(entries[best].Source)) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return entries[best].Mirrors[0] + strings.TrimPrefix(repo, entries[best].Source)
}

// startImageMirrorBerth starts the far berth with auth on: the auth tests'
// users, admin also of the mirror's repositories, and a trust policy of
// the site's key.
func startImageMirrorBerth(t *testing.T, kp keyPair) *authServer {
	t.Helper()
	cfg, audit := writeAuthConfig(t, authOptions{extra: "trust:\n  policies:\n" + policy("*/*", kp.pub, false)})
	doc := strings.Replace(string(readFile(t, cfg)), "  robots:\n",
		"    - subjects: [user:admin]\n      repositories: [\""+mirrorPrefix+"/*/*\"]\n      actions: [admin]\n  robots:\n", 1)
	if err := os.WriteFile(cfg, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	s := newAuthServer(t, startServer(t, "", "--config", cfg), audit)
	s.config = cfg
	secrets.addPEM(t, "the token key", filepath.Join(s.data, "auth", "token-key.pem"))
	return s
}

// checkFarCatalog checks the far berth's answers after the import: each
// version's images name their mirror locations, a search by image finds
// the packages that run it, and installable says yes.
func checkFarCatalog(t *testing.T, far *authServer, site *imageSite) {
	t.Helper()
	admin := far.users["admin"].creds()
	getAs := func(path string, v any) {
		t.Helper()
		h := far.api(t, admin, http.MethodGet, path)
		if h.status != http.StatusOK {
			t.Fatalf("%s", h)
		}
		if err := json.Unmarshal(h.body, v); err != nil {
			t.Fatalf("%s: %v", h, err)
		}
	}
	var imgs apiv1.VersionImages
	getAs("/api/v1/packages/apps/e2e-operator/versions/1.0.0/images", &imgs)
	mirrors := map[string]string{}
	for _, img := range imgs.Images {
		mirrors[img.Reference] = img.Mirror
	}
	for _, img := range []image{site.operator, site.operand} {
		if got, want := mirrors[img.byDigest()], mirrorRef(far.addr, img.byDigest()); got != want {
			t.Errorf("images of apps/e2e-operator: %s lives at %q, want %s\n%+v", img.byDigest(), got, want, imgs.Images)
		}
	}
	if got, want := mirrors[site.init.byTag()], mirrorRef(far.addr, site.init.byTag()); got != want {
		t.Errorf("images of apps/e2e-operator: %s lives at %q, want %s", site.init.byTag(), got, want)
	}

	var found apiv1.SearchResponse
	getAs("/api/v1/packages?image="+url.QueryEscape(site.operand.repo), &found)
	if len(found.Packages) != 1 || found.Packages[0].Namespace != "apps" || found.Packages[0].Name != "e2e-operator" {
		t.Errorf("search image=%s: %+v, want apps/e2e-operator", site.operand.repo, found.Packages)
	}

	var inst apiv1.Installable
	getAs("/api/v1/packages/apps/web/versions/0.1.0/installable", &inst)
	if !inst.Installable || len(inst.Images) != 2 {
		t.Errorf("installable of apps/web: %+v", inst)
	}
}

// mirrorHostileImages exports namespace hostile: the reference with @@ and
// the digest no stand-in holds are reported, the export exits 1, and the
// rest is carried and pulls from the mirror.
func mirrorHostileImages(t *testing.T, site *imageSite, work string) {
	t.Helper()
	archive := filepath.Join(work, "hostile")
	r := run(t, work, berthBin, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "hostile", "-o", archive,
		"--format", "json"}, site.up.registryMap()...)...)
	out := r.stdout + r.stderr
	if r.code != 1 || !strings.Contains(out, site.bad) || !strings.Contains(out, site.etcdImage) {
		t.Fatalf("export of hostile: exit %d, want 1 naming %s and %s\n%s", r.code, site.bad, site.etcdImage, out)
	}
	reg := startUpstreamRegistry(t, "")
	imp := run(t, work, berthBin, "mirror", "import", archive, reg.addr, "--image-prefix", mirrorPrefix, "--resources", filepath.Join(work, "resources-hostile"))
	t.Logf("import of hostile: exit %d\n%s%s", imp.code, imp.stdout, imp.stderr)
	all := func(image, string) bool { return true }
	checkMirrored(t, anonymously, reg.addr, []siteImage{{site.odd, site.odd.byDigest()}, {site.wide, site.wide.byDigest()}}, all)
}
