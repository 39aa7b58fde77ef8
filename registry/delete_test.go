package registry

import (
	"context"
	"net/http"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/distribution/distribution/v3"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/olm"
)

// repository is the registry's repository repo, as in-process readers and
// writers get it.
func repository(t *testing.T, reg *Registry, repo string) distribution.Repository {
	t.Helper()
	named, err := reference.WithName(repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := reg.Namespace().Repository(context.Background(), named)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// tagService is the registry's tag service of repo, as in-process readers get it.
func tagService(t *testing.T, reg *Registry, repo string) distribution.TagService {
	t.Helper()
	return repository(t, reg, repo).Tags(context.Background())
}

// TestUntagDangling removes a tag that names a manifest that is gone, or that
// has no current link, as crashes leave them; it keeps a tag that names a
// manifest, and decides under the push lock of the tag, after a push that
// holds it.
func TestUntagDangling(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	const repo = "apps/web"
	b := pushBlobs(t, reg, repo)
	live := mustPut(t, reg, repo, "live", b.image(nil, "", "", nil))
	gone := mustPut(t, reg, repo, "gone", b.image(nil, "", "", map[string]string{"n": "1"}))
	mustPut(t, reg, repo, "nolink", b.image(nil, "", "", map[string]string{"n": "2"}))
	// The states a crash in distribution's deletes leaves: a revision
	// link gone before the tag, and a tag directory without its current
	// link. A new registry on the same storage, as after the crash.
	if err := reg.driver.Delete(ctx, manifestLinkPath(repo, gone.Digest)); err != nil {
		t.Fatal(err)
	}
	if err := reg.driver.Delete(ctx, path.Join(repositoriesRoot, repo, "_manifests", "tags", "nolink", "current")); err != nil {
		t.Fatal(err)
	}
	reg = newRegistry(t, Options{Storage: onDisk(dir)})
	ts := tagService(t, reg, repo)
	for _, tc := range []struct {
		tag     string
		removed bool
	}{{"live", false}, {"gone", true}, {"nolink", true}, {"never", false}} {
		removed, err := reg.UntagDangling(ctx, repo, tc.tag)
		if err != nil || removed != tc.removed {
			t.Errorf("UntagDangling(%s) = %v, %v; want %v", tc.tag, removed, err, tc.removed)
		}
	}
	if tags, err := ts.All(ctx); err != nil || !slices.Equal(tags, []string{"live"}) {
		t.Errorf("tags left: %v, %v; want [live]", tags, err)
	}

	// A push holding the tag's lock re-points a dangling tag: the untag
	// waits for it, checks again, and keeps the tag.
	if err := ts.Tag(ctx, "gone", ocispec.Descriptor{Digest: gone.Digest}); err != nil {
		t.Fatal(err)
	}
	unlock, err := reg.guard.lockTag(context.Background(), repo, "gone")
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		removed bool
		err     error
	}
	done := make(chan answer, 1)
	go func() {
		removed, err := reg.UntagDangling(ctx, repo, "gone")
		done <- answer{removed, err}
	}()
	select {
	case a := <-done:
		unlock()
		t.Fatalf("UntagDangling did not wait for the push of the tag: %+v", a)
	case <-time.After(50 * time.Millisecond):
	}
	if err := ts.Tag(ctx, "gone", live); err != nil {
		t.Fatal(err)
	}
	unlock()
	if a := <-done; a.err != nil || a.removed {
		t.Errorf("UntagDangling of a tag re-pointed meanwhile = %+v; want it kept", a)
	}
	if d, err := ts.Get(ctx, "gone"); err != nil || d.Digest != live.Digest {
		t.Errorf("the re-pointed tag: %v, %v", d.Digest, err)
	}
}

// TestManifestDeleteUntagsFirst: DELETE of a manifest by digest removes the
// tags that name it before the manifest, so a crash between the two leaves
// an untagged manifest, never a tag naming nothing.
func TestManifestDeleteUntagsFirst(t *testing.T) {
	var rec recorder
	reg := newRegistry(t, Options{OnEvent: rec.add})
	const repo = "apps/web"
	b := pushBlobs(t, reg, repo)
	m := b.image(nil, "", "", nil)
	d := mustPut(t, reg, repo, "1.0", m)
	mustPut(t, reg, repo, "latest", m)
	rec.take()
	if resp := do(reg, http.MethodDelete, "/v2/"+repo+"/manifests/"+d.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %s", resp.Status)
	}
	ev := rec.take()
	if len(ev) != 3 || ev[0].Tag == "" || ev[1].Tag == "" || ev[2].Tag != "" || ev[2].Digest != d.Digest.String() {
		t.Fatalf("delete events %+v; want both tags removed, then the manifest", ev)
	}
}

// TestRemoveUntagsFirst: removing a repository removes its tags first, the
// package versions before the tags naming a digest (cosign's signatures),
// and then the rest; nothing is left.
func TestRemoveUntagsFirst(t *testing.T) {
	var rec recorder
	reg := newRegistry(t, Options{OnEvent: rec.add})
	const repo = "apps/web"
	b := pushBlobs(t, reg, repo)
	var want []string
	for _, v := range []string{"1.0", "2.0", "3.0"} {
		d := mustPut(t, reg, repo, v, b.image(nil, "", "", map[string]string{"v": v}))
		sig := "sha256-" + d.Digest.Encoded() + ".sig"
		mustPut(t, reg, repo, sig, b.image(&d, "application/vnd.dev.cosign.artifact.sig.v1+json", "", nil))
		want = append(want, v, sig)
	}
	rec.take()
	named, _ := reference.WithName(repo)
	if err := reg.Namespace().(distribution.RepositoryRemover).Remove(context.Background(), named); err != nil {
		t.Fatal(err)
	}
	var untagged []string
	for _, e := range rec.take() {
		if e.Action == EventDelete && e.Tag != "" {
			untagged = append(untagged, e.Tag)
		}
	}
	slices.Sort(want)
	if got := slices.Sorted(slices.Values(untagged)); !slices.Equal(got, want) {
		t.Fatalf("untagged %v; want %v", untagged, want)
	}
	for i, tag := range untagged[:3] {
		if namesDigest(tag) {
			t.Errorf("tag %d untagged is %s; the versions go before their signatures: %v", i, tag, untagged)
		}
	}
	if _, err := reg.driver.Stat(context.Background(), path.Join(repositoriesRoot, repo)); !isGone(err) {
		t.Errorf("the repository is still there: %v", err)
	}
}

// TestRemoveKeepsNestedRepositories: the deletes of a package named olm,
// stored before the name was reserved, reach its own repository alone: a
// version's DELETE over /v2/, retention's untag, the removal of the whole
// repository (DELETE /api/v1/packages/{ns}/{name}) and garbage collection. The namespace's OLM catalog, team-b/olm/catalog, lies in its path
// and keeps its tag, its manifest and its blobs, through a garbage
// collection too.
func TestRemoveKeepsNestedRepositories(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	reg := newRegistry(t, Options{Storage: onDisk(dir)})
	const pkg = "team-b/olm"
	catalog := olm.CatalogRepository("team-b")
	old, _ := putInProcess(t, reg, pkg, "1.0.0", []byte("a package stored before olm was reserved"))
	older, _ := putInProcess(t, reg, pkg, "0.9.0", []byte("its older version"))
	oldest, _ := putInProcess(t, reg, pkg, "0.8.0", []byte("its oldest version"))
	mf, layer := putInProcess(t, reg, catalog, olm.CatalogTag, []byte("catalog layer"))
	// A client may delete its versions over /v2/, though it may push none.
	if resp := do(reg, http.MethodDelete, "/v2/"+pkg+"/manifests/"+older.Digest.String(), "", nil); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("DELETE /v2/%s/manifests/%s = %s, want 202", pkg, older.Digest, resp.Status)
	}
	// Retention removes an expired version's tag so.
	if removed, err := reg.Untag(ctx, pkg, "0.8.0", oldest.Digest); !removed || err != nil {
		t.Fatalf("Untag %s:0.8.0 = %v, %v", pkg, removed, err)
	}
	named, _ := reference.WithName(pkg)
	if err := reg.Namespace().(distribution.RepositoryRemover).Remove(ctx, named); err != nil {
		t.Fatal(err)
	}
	if tags, err := tagService(t, reg, pkg).All(ctx); len(tags) != 0 {
		t.Errorf("%s still has tags %v (%v)", pkg, tags, err)
	}
	if ok, err := exists(t, reg, pkg, old.Digest); ok || err != nil {
		t.Errorf("%s@%s is still there (%v)", pkg, old.Digest, err)
	}
	age(t, dir, 2*time.Hour)
	if _, err := reg.CollectGarbage(ctx, GCOptions{}); err != nil {
		t.Fatal(err)
	}
	if desc, err := tagService(t, reg, catalog).Get(ctx, olm.CatalogTag); err != nil || desc.Digest != mf.Digest {
		t.Fatalf("after removing %s, %s:%s = %v, %v; want %s", pkg, catalog, olm.CatalogTag, desc.Digest, err, mf.Digest)
	}
	if ok, err := exists(t, reg, catalog, mf.Digest); !ok || err != nil {
		t.Errorf("after removing %s, the manifest %s of %s is gone (%v)", pkg, mf.Digest, catalog, err)
	}
	if code := status(reg, "/v2/"+catalog+"/blobs/"+layer.Digest.String()); code != http.StatusOK {
		t.Errorf("after removing %s and collecting garbage, GET the layer of %s = %d, want 200", pkg, catalog, code)
	}
}

// exists reports whether repo holds manifest d.
func exists(t *testing.T, reg *Registry, repo string, d digest.Digest) (bool, error) {
	t.Helper()
	ms, err := repository(t, reg, repo).Manifests(context.Background())
	if err != nil {
		return false, err
	}
	return ms.Exists(context.Background(), d)
}
