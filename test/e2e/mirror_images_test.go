package e2e

import (
	"encoding/json"
	"fmt"
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
	"github.com/berth-registry/berth/mirror"
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
// --registry-map under their public names; berth mirror import puts them
// under a prefix of a far berth with auth on (which then names the mirror
// locations, finds the packages by image and answers installable). Every
// image pulls by digest from its mirror location, a tag moved upstream
// after the export names the exported digest, cosign verifies offline, the
// ImageDigestMirrorSet maps every source repository, berth mirror check
// passes (with a client policy too, which fails on an unsigned image it
// requires signed), a delta against the far side's inventory carries only
// the image new upstream, and mirror check fails naming an image deleted
// at the far side. An export keeping two platforms goes into
// distribution's registry; then the hostile namespace: a reference with
// @@, an index of 200 platforms and a digest nobody holds.
func TestMirrorImages(t *testing.T) {
	site := startImageSite(t)
	work := t.TempDir()
	archive := filepath.Join(work, "apps")
	exp := summaryOf(t, berth(t, work, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "apps", "-o", archive,
		"--format", "json"}, site.up.registryMap()...)...).stdout)
	appsImages := site.appsImages(t)
	if exp.Versions != 5 || exp.Images != len(appsImages) || len(exp.Failed)+len(exp.ImagesFailed) != 0 {
		t.Fatalf("export of apps: %+v, want 5 versions and %d images; the archive's images: %v", exp, len(appsImages), archiveImages(t, archive))
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
	if imp.Versions != 5 || imp.Images != len(appsImages) || len(imp.Failed)+len(imp.ImagesFailed)+len(imp.Quarantined) != 0 {
		t.Fatalf("import into the far berth: %+v", imp)
	}
	t.Logf("apps: %d versions and %d images, %d manifests and %d blobs (%d bytes): exported in %.2fs, imported into a berth with auth in %.2fs",
		exp.Versions, exp.Images, exp.Manifests, exp.Blobs, exp.Bytes, exp.Seconds, imp.Seconds)
	all := func(image, string) bool { return true }
	checkMirrored(t, admin.run, far.addr, appsImages, all)
	if got := craneDigest(t, admin.run, mirrorRef(far.addr, site.other.byTag())); got != site.other.digest {
		t.Errorf("%s at the mirror is %s, want the exported %s (the tag moved upstream to %s)", site.other.byTag(), got, site.other.digest, moved.digest)
	}
	for _, img := range []image{site.operator, site.operand, site.plain} {
		admin.must(t, cosignBin, "verify", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline", mirrorRef(far.addr, img.byDigest()))
	}
	admin.must(t, cosignBin, "verify-attestation", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline",
		"--type", "slsaprovenance", mirrorRef(far.addr, site.operator.byDigest()))
	checkDigestMirrorSet(t, resources, far.addr, appsImages)
	checkOLMChain(t, admin, far, resources, site)
	checkFarCatalog(t, far, site)

	check := []string{"mirror", "check", "--namespace", "apps", "--registry", far.addr, "--format", "json"}
	checkInstall(t, admin, check, 5, "")
	// A client policy over source repositories: the signed images verify at
	// their mirrors; one requiring a signature of the unsigned img does not.
	signed := imagePolicy(t, site.kp.pub, site.operator.repo, site.operand.repo, site.plain.repo)
	checkInstall(t, admin, slices.Concat(check, []string{"--policy", signed}), 5, "")
	checkInstall(t, admin, slices.Concat(check, []string{"--policy", imagePolicy(t, site.kp.pub, site.img.repo)}), 4, site.img.repo)
	checkDeltaCarriesOnly(t, site, admin, far, work, moved)

	admin.must(t, craneBin, "delete", mirrorRef(far.addr, site.img.byDigest()))
	checkInstall(t, admin, check, 4, site.img.repo)
	var inst apiv1.Installable
	if h := far.api(t, admin.creds(), http.MethodGet, "/api/v1/packages/apps/web/versions/0.1.0/installable"); h.status != http.StatusOK ||
		json.Unmarshal(h.body, &inst) != nil || inst.Installable || !strings.Contains(strings.Join(inst.Problems, "\n"), site.img.repo) {
		t.Errorf("installable of apps/web after %s was deleted at the mirror: %s", site.img.byDigest(), h)
	}

	mirrorSomePlatforms(t, site, work, moved)
	mirrorHostileImages(t, site, work)
}

// checkInstall runs berth mirror check args as a and checks that
// installable versions of the 5 selected can install, and that the output
// names notHere when some cannot (exit status 1).
func checkInstall(t *testing.T, a *account, args []string, installable int, notHere string) {
	t.Helper()
	r := a.run(t, berthBin, args...)
	var got struct {
		Versions       []apiv1.Installable `json:"versions"`
		Installable    int                 `json:"installable"`
		NotInstallable int                 `json:"notInstallable"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Errorf("berth %s: %v\n%s%s", strings.Join(args, " "), err, r.stdout, r.stderr)
		return
	}
	wantCode := 0
	if installable < 5 {
		wantCode = 1
	}
	if r.code != wantCode || got.Installable != installable || got.NotInstallable != 5-installable || len(got.Versions) != 5 ||
		!strings.Contains(r.stdout+r.stderr, notHere) {
		t.Errorf("berth %s: exit %d, %d installable and %d not, want exit %d, %d installable, naming %q\n%s%s",
			strings.Join(args, " "), r.code, got.Installable, got.NotInstallable, wantCode, installable, notHere, r.stdout, r.stderr)
	}
}

// imagePolicy writes a client trust policy requiring signatures by key on
// the source repositories repos.
func imagePolicy(t *testing.T, key string, repos ...string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "trust.yaml")
	doc := fmt.Sprintf("policies:\n  - images: [%s]\n    keys: [%q]\n    require: true\n", `"`+strings.Join(repos, `", "`)+`"`, key)
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// checkDeltaCarriesOnly exports namespace apps again against the far
// berth's inventory: the packages and images it holds are not carried,
// and the one image that is new upstream, what ghcr.io/org/other:1.0 moved
// to, is.
func checkDeltaCarriesOnly(t *testing.T, site *imageSite, a *account, far *authServer, work string, moved image) {
	t.Helper()
	inv := filepath.Join(work, "far.inventory.json")
	a.must(t, berthBin, "mirror", "inventory", far.addr, "-o", inv)
	delta := filepath.Join(work, "apps-delta")
	berth(t, work, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "apps", "--inventory", inv, "-o", delta},
		site.up.registryMap()...)...)
	m, _, err := mirror.ReadManifest(filepath.Join(delta, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var news []string
	for _, img := range m.Images {
		if img.Repository == moved.repo {
			for _, d := range img.Needs {
				news = append(news, d.String())
			}
			if img.Digest.String() != moved.digest {
				t.Errorf("the delta's %s is %s, want %s, where the tag moved", img.Reference, img.Digest, moved.digest)
			}
		}
	}
	carried := 0
	for _, en := range m.Content {
		if en.Carried {
			carried++
			if !slices.Contains(news, en.Digest.String()) {
				t.Errorf("the delta against the far side's inventory carries %s, which the far side has", en.Digest)
			}
		}
	}
	if carried == 0 {
		t.Errorf("the delta carries nothing of %s, new upstream", moved.byDigest())
	}
}

// mirrorSomePlatforms exports namespace apps again, keeping keptPlatforms,
// after ghcr.io/org/other:1.0 moved to moved: the operator's index, which
// also has linux/s390x, is carried unchanged with the manifests of the
// platforms kept. distribution's registry refuses it by default, and the
// import says how to accept it; one that accepts it serves every image by
// digest, without the s390x manifest. The target's tag other:1.0, naming
// what the tag named before it moved, is re-pointed at what the export
// recorded, and reported.
func mirrorSomePlatforms(t *testing.T, site *imageSite, work string, moved image) {
	t.Helper()
	if len(site.operator.platforms) <= len(keptPlatforms) {
		t.Fatalf("%s has %d platforms: nothing to filter", site.operator.repo, len(site.operator.platforms))
	}
	archive := filepath.Join(work, "apps-platforms")
	berth(t, work, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "apps", "-o", archive,
		"--platform", strings.Join(keptPlatforms, ",")}, site.up.registryMap()...)...)

	strict := startUpstreamRegistry(t, "")
	r := run(t, work, berthBin, "mirror", "import", archive, strict.addr, "--resources", filepath.Join(work, "resources-strict"), "--format", "json")
	refused := summaryOf(t, r.stdout)
	if r.code != 1 || len(refused.ImagesFailed) != 1 || refused.ImagesFailed[0].Reference != site.operator.byDigest() ||
		!strings.Contains(refused.ImagesFailed[0].Reason, "validation.manifests.indexes.platforms") {
		t.Errorf("import of an index carried in part into a registry that wants every platform: exit %d, %+v", r.code, refused.ImagesFailed)
	}

	reg := startUpstreamRegistry(t, "validation:\n  manifests:\n    indexes:\n      platforms: none\n")
	stale := mirrorRef(reg.addr, site.other.byTag())
	mustRun(t, work, craneBin, "copy", site.up.at(t, site.other.byDigest()), stale)
	imp := summaryOf(t, berth(t, work, "mirror", "import", archive, reg.addr, "--image-prefix", mirrorPrefix,
		"--resources", filepath.Join(work, "resources-registry"), "--format", "json").stdout)
	if imp.Versions != 5 || len(imp.Failed)+len(imp.ImagesFailed) != 0 {
		t.Fatalf("import into distribution's registry: %+v", imp)
	}
	if !slices.ContainsFunc(imp.Moved, func(m string) bool { return strings.Contains(m, stale) }) {
		t.Errorf("import into distribution's registry: moved %q, want %s, which named %s", imp.Moved, stale, site.other.digest)
	}
	if got := craneDigest(t, anonymously, stale); got != moved.digest {
		t.Errorf("%s is %s, want %s, which the tag named upstream at the export", stale, got, moved.digest)
	}
	images := slices.DeleteFunc(site.appsImages(t), func(img siteImage) bool { return img.repo == site.other.repo })
	images = append(images, siteImage{moved, moved.byTag()})
	keep := func(img image, platform string) bool {
		return img.repo != site.operator.repo || slices.Contains(keptPlatforms, platform)
	}
	checkMirrored(t, anonymously, reg.addr, images, keep)
	mustSucceed(t, anonymously, cosignBin, "verify", "--key", site.kp.pub, "--insecure-ignore-tlog=true", "--offline", mirrorRef(reg.addr, site.operator.byDigest()))
}

// archiveImages lists the archive's images: reference, digest, the
// versions that run it and any problem.
func archiveImages(t *testing.T, archive string) []string {
	t.Helper()
	m, _, err := mirror.ReadManifest(filepath.Join(archive, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, img := range m.Images {
		out = append(out, fmt.Sprintf("%s (%s) of %v %s", img.Reference, img.Digest, img.Versions, img.Problem))
	}
	return out
}

// appsImages are the images of namespace apps, each with the reference
// its package names. The bundle images the source generated for its OLM
// versions are not among them: they travel as referrers of their versions
// (the far berth generates its own, checked by checkOLMChain).
func (s *imageSite) appsImages(t *testing.T) []siteImage {
	t.Helper()
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
		if len(img.platforms) <= 1 {
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
// longest prefix by whole path components maps a repository); each maps
// its source exactly onto the same path under target/mirrorPrefix, and
// covers some of those repositories.
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
		doc, err := os.ReadFile(filepath.Join(resources, f.file))
		if err == nil {
			err = yaml.Unmarshal(doc, &set)
		}
		if err != nil {
			t.Errorf("the import's %s: %v", f.file, err)
			continue
		}
		entries := append(set.Spec.ImageDigestMirrors, set.Spec.ImageTagMirrors...)
		if set.Kind != f.kind || set.APIVersion != "config.openshift.io/v1" || len(entries) == 0 {
			t.Errorf("%s: %s %s with %d entries, want a config.openshift.io/v1 %s", f.file, set.APIVersion, set.Kind, len(entries), f.kind)
		}
		for _, m := range entries {
			if want := mirrorRef(target, m.Source); !slices.Equal(m.Mirrors, []string{want}) {
				t.Errorf("%s: %s has mirrors %v, want [%s]", f.file, m.Source, m.Mirrors, want)
			}
			if !slices.ContainsFunc(f.repos, func(repo string) bool { return repo == m.Source || strings.HasPrefix(repo, m.Source+"/") }) {
				t.Errorf("%s maps %s, which covers none of %v", f.file, m.Source, f.repos)
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

// checkOLMChain checks what OLM pulls at the far site, as a: the
// ClusterCatalog the import wrote names the far berth's catalog image of
// apps, which pulls there; its olm.bundle of e2e-operator names a bundle
// image of the far berth, which pulls there, and lists the operator and
// operand by their public names, which the mirror sets send to the mirror.
func checkOLMChain(t *testing.T, a *account, far *authServer, resources string, site *imageSite) {
	t.Helper()
	var cc struct {
		Kind string `json:"kind"`
		Spec struct {
			Source struct {
				Image struct {
					Ref string `json:"ref"`
				} `json:"image"`
			} `json:"source"`
		} `json:"spec"`
	}
	doc, err := os.ReadFile(filepath.Join(resources, "clustercatalog-apps.yaml"))
	if err == nil {
		err = yaml.Unmarshal(doc, &cc)
	}
	if want := far.addr + "/apps/olm/catalog:latest"; err != nil || cc.Kind != "ClusterCatalog" || cc.Spec.Source.Image.Ref != want {
		t.Errorf("the import's clustercatalog-apps.yaml: %v, %s of %q, want a ClusterCatalog of %s", err, cc.Kind, cc.Spec.Source.Image.Ref, want)
	}
	var bundle fbcDoc
	waitUntil(t, far.server, "the far catalog's bundle of e2e-operator", func() bool {
		h := far.api(t, a.creds(), http.MethodGet, "/api/v1/olm/apps/all")
		if h.status != http.StatusOK {
			return false
		}
		for _, d := range decodeDocs(t, h.url, string(h.body)) {
			if d.str("schema") == "olm.bundle" && d.str("package") == "e2e-operator" {
				bundle = d
			}
		}
		return bundle != nil && a.run(t, craneBin, "digest", far.addr+"/apps/olm/catalog:latest").code == 0
	})
	if img := bundle.str("image"); !strings.HasPrefix(img, far.addr+"/apps/e2e-operator@sha256:") {
		t.Errorf("the far catalog's bundle image is %q, want one of %s/apps/e2e-operator by digest", img, far.addr)
	} else {
		craneDigest(t, a.run, img)
	}
	related, _ := json.Marshal(bundle["relatedImages"])
	for _, img := range []image{site.operator, site.operand} {
		if !strings.Contains(string(related), `"`+img.byDigest()+`"`) {
			t.Errorf("the far catalog's bundle of e2e-operator lists the related images %s, without %s", related, img.byDigest())
		}
	}
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

// mirrorHostileImages exports namespace hostile: the reference with @@
// and the digest no stand-in holds are reported with the versions that
// run them, the export exits 1, and the rest is carried (odd, and the index
// of 200 platforms whole as docs/mirror.md says) and pulls from the mirror.
func mirrorHostileImages(t *testing.T, site *imageSite, work string) {
	t.Helper()
	archive := filepath.Join(work, "hostile")
	r := run(t, work, berthBin, append([]string{"mirror", "export", "--source", site.src.addr, "--namespace", "hostile", "-o", archive,
		"--format", "json"}, site.up.registryMap()...)...)
	exp := summaryOf(t, r.stdout)
	failed := map[string]string{}
	for _, f := range exp.ImagesFailed {
		failed[f.Reference] = strings.Join(f.Versions, " ")
	}
	want := map[string]string{site.bad: "hostile/odd:1.0.0", site.etcdImage: "hostile/etcd:0.9.4"}
	if r.code != 1 || exp.Versions != 3 || exp.Images != 2 || len(exp.Failed) != 0 || !maps.Equal(failed, want) {
		t.Fatalf("export of hostile: exit %d, %+v; want exit 1, 3 versions, 2 images, and the images failed %v\n%s", r.code, exp, want, r.stderr)
	}
	t.Logf("hostile: %d images carried (one an index of %d platforms), %d manifests, in %.2fs", exp.Images, widePlatforms, exp.Manifests, exp.Seconds)
	reg := startUpstreamRegistry(t, "")
	r = run(t, work, berthBin, "mirror", "import", archive, reg.addr, "--image-prefix", mirrorPrefix,
		"--resources", filepath.Join(work, "resources-hostile"), "--format", "json")
	if imp := summaryOf(t, r.stdout); imp.Versions != 3 || imp.Images != 2 || !strings.Contains(r.stderr, site.etcdImage) {
		t.Errorf("import of hostile: exit %d, %+v, want 3 versions, 2 images and a warning naming %s\n%s", r.code, imp, site.etcdImage, r.stderr)
	}
	all := func(image, string) bool { return true }
	checkMirrored(t, anonymously, reg.addr, []siteImage{{site.odd, site.odd.byDigest()}, {site.wide, site.wide.byDigest()}}, all)
}
