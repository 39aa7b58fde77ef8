package catalog_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

var all = catalog.Access{All: true}

func TestPushedPackageIsSearchable(t *testing.T) {
	e := newEnv(t, envOptions{})
	p := load(t, "kudo/kafka/2.5.1-1.3.2")
	dgst := e.pushPackage("kudo", p)
	e.waitFor("kafka in search", func() bool {
		res, err := e.cat.Search(e.ctx, catalog.Query{Text: "kafka", Access: all})
		return err == nil && len(res.Packages) == 1 && res.Packages[0].Digest == dgst
	})
	v, err := e.cat.Version(e.ctx, all, "kudo", "kafka", p.Metadata.Version)
	if err != nil {
		t.Fatal(err)
	}
	if v.Digest != dgst || v.Format != pkgformat.KUDO || v.Metadata.Name != "kafka" || len(v.Files) != len(p.Files) {
		t.Errorf("version = %+v", v)
	}
	if v.PullReference != "kudo/kafka@"+dgst {
		t.Errorf("pull reference = %q", v.PullReference)
	}
}

// TestFileServesExactBytes reads every file of real packages through File and
// compares it with the package directory.
func TestFileServesExactBytes(t *testing.T) {
	e := newEnv(t, envOptions{})
	pkgs := []*pkgformat.Package{load(t, "kudo/kafka/2.5.1-1.3.2"), load(t, "kudo/cowsay/0.2.0")}
	pkgs = append(pkgs, loadRepository(t, "olm-community/etcd")[0])
	for _, p := range pkgs {
		e.pushPackage("files", p)
	}
	for _, p := range pkgs {
		tag := pkgformat.Tag(p.Metadata.Version)
		e.waitFor(p.Metadata.Name, func() bool { return e.entry("files", p.Metadata.Name, tag) != nil })
		for _, f := range p.Files {
			rc, size, err := e.cat.File(e.ctx, all, "files", p.Metadata.Name, p.Metadata.Version, f.Path)
			if err != nil {
				t.Fatalf("%s %s: %v", p.Metadata.Name, f.Path, err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || size != int64(len(f.Data)) || !bytes.Equal(got, f.Data) {
				t.Errorf("%s %s: %d bytes (size %d, err %v), want %d", p.Metadata.Name, f.Path, len(got), size, err, len(f.Data))
			}
		}
	}
	_, _, err := e.cat.File(e.ctx, all, "files", "kafka", "2.5.1_1.3.2", "no/such/file")
	if !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("missing file: err = %v, want ErrNotFound", err)
	}
}

// TestArtifactsThatAreNotValidPackages pushes what a registry may hold
// besides good packages: each is recorded with its status and reason, and
// never served as a version.
func TestArtifactsThatAreNotValidPackages(t *testing.T) {
	e := newEnv(t, envOptions{})
	good := load(t, "kudo/cowsay/0.2.0")
	art, err := good.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	content := layer{pkgformat.ContentMediaType, art.Content}
	traversal := tarball(t, map[string]string{"../escape.yaml": "x: 1", "operator.yaml": "name: x"})
	control := tarball(t, map[string]string{"templates/\x1b]0;owned\a.yaml": "x: 1", "operator.yaml": "name: x"})
	badMD := good.Metadata
	badMD.Name = "bad"
	badConfig, err := json.Marshal(badMD)
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name, tag, status, reason string
		push                      func(repo, tag string)
	}{
		{"container image", "v1", apiv1.StatusIgnored, "not a package: artifact of type application/vnd.oci.image.config.v1+json", func(repo, tag string) {
			e.pushArtifact(repo, tag, "", ocispec.MediaTypeImageConfig, []byte(`{"architecture":"amd64","os":"linux"}`), layer{ocispec.MediaTypeImageLayerGzip, gz(t, []byte("x"))})
		}},
		{"cosign signature tag", "sha256-abc.sig", apiv1.StatusIgnored, "not a package: artifact of type application/vnd.oci.image.config.v1+json", func(repo, tag string) {
			e.pushArtifact(repo, tag, "", "application/vnd.oci.image.config.v1+json", []byte(`{}`), layer{"application/vnd.dev.cosign.simplesigning.v1+json", []byte(`{"critical":{}}`)})
		}},
		{"image index", "multi", apiv1.StatusIgnored, "not a package: a application/vnd.oci.image.index.v1+json", func(repo, tag string) {
			idx, _ := json.Marshal(ocispec.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageIndex, Manifests: []ocispec.Descriptor{}})
			e.pushManifest(repo, tag, ocispec.MediaTypeImageIndex, idx)
		}},
		{"config names another package", "0.2.0", apiv1.StatusInvalid, `operator.yaml: package name "cowsay" does not match the expected name "wrongname": invalid package`, func(repo, tag string) {
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, art.Config, content)
		}},
		{"content breaks the safety rules", "0.2.0", apiv1.StatusInvalid, "content: ../escape.yaml: path escapes the package root (..): invalid package", func(repo, tag string) {
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, badConfig, layer{pkgformat.ContentMediaType, traversal})
		}},
		{"control characters in a path", "0.2.0", apiv1.StatusInvalid, `content: "templates/\x1b]0;owned\a.yaml": path contains the control character U+001B (C0, DEL and C1 control characters are not allowed): invalid package`, func(repo, tag string) {
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, badConfig, layer{pkgformat.ContentMediaType, control})
		}},
		{"content is not gzip", "0.2.0", apiv1.StatusInvalid, "content: archive: corrupt or truncated gzip stream: gzip: invalid header: invalid package", func(repo, tag string) {
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, badConfig, layer{pkgformat.ContentMediaType, []byte("plain text")})
		}},
		{"package without content", "0.2.0", apiv1.StatusIgnored, "package manifest has no content layer: layers[0] must be of media type " + pkgformat.ContentMediaType, func(repo, tag string) {
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, badConfig)
		}},
		{"repository outside namespace/name", "0.2.0", apiv1.StatusIgnored, "not a package repository: packages live at <namespace>/<name>", func(_, tag string) {
			e.pushArtifact("deep/er/cowsay", tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, art.Config, content)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Each case has its own repository: "bad" refuses re-pointed versions.
			ns, name := fmt.Sprintf("case%d", i), "bad"
			switch tc.name {
			case "config names another package":
				name = "wrongname"
			case "repository outside namespace/name":
				ns, name = "deep", "er/cowsay"
			}
			tc.push(ns+"/"+name, tc.tag)
			var got *catalog.Entry
			e.waitFor(tc.name, func() bool { got = e.entry(ns, name, tc.tag); return got != nil })
			if got.Status != tc.status || got.Reason != tc.reason {
				t.Errorf("status %q, reason %q; want %q, %q", got.Status, got.Reason, tc.status, tc.reason)
			}
			if _, err := e.cat.Version(e.ctx, all, ns, name, tc.tag); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Version: err = %v, want ErrNotFound with the reason", err)
			}
			if _, err := e.cat.Package(e.ctx, all, ns, name); !errors.Is(err, catalog.ErrNotFound) || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("Package: err = %v, want ErrNotFound with the reason", err)
			}
		})
	}
	// None of the artifacts above is searchable; all are listed as unindexed.
	res, err := e.cat.Search(e.ctx, catalog.Query{Access: all})
	if err != nil || res.Total != 0 {
		t.Errorf("search over bad artifacts: %+v, err %v", res, err)
	}
	un, err := e.cat.Unindexed(e.ctx, all, 100, 0)
	if err != nil || len(un) != 9 {
		t.Errorf("unindexed: %d artifacts, err %v; want 9", len(un), err)
	}
}

// TestHelmAndPlainOrasPushesAreIndexed covers artifacts berth did not build:
// a Helm chart as helm push stores it, and a package pushed by plain oras
// push with an empty config.
func TestHelmAndPlainOrasPushesAreIndexed(t *testing.T) {
	e := newEnv(t, envOptions{})
	chart := tarball(t, map[string]string{
		"mychart/Chart.yaml":        "apiVersion: v2\nname: mychart\nversion: 1.2.3\ndescription: A chart for tests\nkeywords: [demo]\n",
		"mychart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n",
		"mychart/values.yaml":       "replicas: 1\n",
	})
	helmConfig := `{"apiVersion":"v2","name":"mychart","version":"1.2.3","description":"A chart for tests","keywords":["demo"]}`
	e.pushArtifact("charts/mychart", "1.2.3", "", pkgformat.HelmConfigMediaType, []byte(helmConfig), layer{"application/vnd.cncf.helm.chart.content.v1.tar+gzip", chart})

	p := load(t, "kudo/cowsay/0.2.0")
	art, _ := p.Artifact()
	e.pushArtifact("oras/cowsay", "0.2.0", pkgformat.ArtifactType, ocispec.MediaTypeEmptyJSON, []byte("{}"), layer{pkgformat.ContentMediaType, art.Content})

	e.waitFor("both indexed", func() bool {
		a, b := e.entry("charts", "mychart", "1.2.3"), e.entry("oras", "cowsay", "0.2.0")
		return a != nil && b != nil
	})
	h := e.entry("charts", "mychart", "1.2.3")
	if h.Status != apiv1.StatusIndexed || h.Metadata.Format != pkgformat.Helm || h.Metadata.Description != "A chart for tests" {
		t.Fatalf("helm chart: %+v %+v", h, h.Metadata)
	}
	rc, _, err := e.cat.File(e.ctx, all, "charts", "mychart", "1.2.3", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "replicas: 1\n" {
		t.Errorf("values.yaml = %q", b)
	}
	o := e.entry("oras", "cowsay", "0.2.0")
	if o.Status != apiv1.StatusIndexed || o.Metadata.Name != "cowsay" || o.Metadata.Format != pkgformat.KUDO {
		t.Errorf("oras push: %+v", o)
	}
}

// TestDeletesFollow deletes by tag and by digest through the registry API.
func TestDeletesFollow(t *testing.T) {
	e := newEnv(t, envOptions{})
	var tags []string
	for _, p := range loadRepository(t, "olm-community/etcd")[:3] {
		e.pushPackage("olm", p)
		tags = append(tags, pkgformat.Tag(p.Metadata.Version))
	}
	e.waitFor("three versions", func() bool {
		p, err := e.cat.Package(e.ctx, all, "olm", "etcd")
		return err == nil && len(p.Versions) == 3
	})
	en := e.entry("olm", "etcd", tags[0])
	req, _ := http.NewRequest(http.MethodDelete, "http://"+e.host+"/v2/olm/etcd/manifests/"+en.Digest, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %v %v", resp, err)
	}
	e.waitFor("version removed", func() bool { return e.entry("olm", "etcd", tags[0]) == nil })

	deleted, err := e.cat.DeletePackage(e.ctx, "olm", "etcd")
	if err != nil || len(deleted) != 2 {
		t.Fatalf("DeletePackage = %v, %v", deleted, err)
	}
	if _, err := e.cat.Package(e.ctx, all, "olm", "etcd"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("package after delete: %v", err)
	}
	if _, err := e.repo("olm/etcd").Resolve(e.ctx, tags[1]); err == nil {
		t.Errorf("tag %s still in the registry", tags[1])
	}
	if _, err := e.cat.DeletePackage(e.ctx, "olm", "etcd"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("second delete: %v, want ErrNotFound", err)
	}
	ch, err := e.cat.Changes(e.ctx, catalog.Access{All: true}, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var puts, dels int
	for i, c := range ch.Changes {
		if i > 0 && c.Seq <= ch.Changes[i-1].Seq {
			t.Errorf("change seq not increasing: %v", ch.Changes)
		}
		switch c.Action {
		case apiv1.ActionPut:
			puts++
		case apiv1.ActionDelete:
			dels++
		}
	}
	if puts != 3 || dels != 3 {
		t.Errorf("changes: %d puts, %d deletes; want 3 and 3", puts, dels)
	}
}

// countingSource counts the manifest and blob reads of a source.
type countingSource struct {
	catalog.Source
	reads atomic.Int64
}

func (s *countingSource) Manifest(ctx context.Context, repo, d string) (string, []byte, error) {
	s.reads.Add(1)
	return s.Source.Manifest(ctx, repo, d)
}

func (s *countingSource) Blob(ctx context.Context, repo, d string) (io.ReadCloser, error) {
	s.reads.Add(1)
	return s.Source.Blob(ctx, repo, d)
}

// TestReconcileRepairsLostEvents runs a registry whose events never reach
// the catalog: the reconciler alone indexes, re-points and removes, and a
// second pass over an intact store reads no package.
func TestReconcileRepairsLostEvents(t *testing.T) {
	var src *countingSource
	e := newEnv(t, envOptions{lose: true, source: func(s catalog.Source) catalog.Source {
		src = &countingSource{Source: s}
		return src
	}})
	kafka := loadRepository(t, "olm-community/etcd")
	for _, p := range kafka {
		e.pushPackage("olm", p)
	}
	cow := load(t, "kudo/cowsay/0.2.0")
	e.pushPackage("scratch", cow)
	st, err := e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != len(kafka)+1 || st.Removed != 0 || st.Failed != 0 {
		t.Fatalf("first reconcile: %+v, %v", st, err)
	}
	before := src.reads.Load()
	st, err = e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != 0 || st.Removed != 0 {
		t.Fatalf("second reconcile: %+v, %v", st, err)
	}
	if n := src.reads.Load() - before; n != 0 {
		t.Errorf("reconciling an intact store read %d manifests and blobs, want 0", n)
	}

	// Re-point scratch/cowsay:0.2.0 (scratch allows overwrites) and delete an etcd version.
	other := *cow
	other.Files = append(slices.Clone(cow.Files), pkgformat.File{Path: "NOTES.txt", Mode: 0o644, Data: []byte("changed")})
	newDigest := e.pushPackage("scratch", &other)
	gone := e.entry("olm", "etcd", pkgformat.Tag(kafka[0].Metadata.Version))
	req, _ := http.NewRequest(http.MethodDelete, "http://"+e.host+"/v2/olm/etcd/manifests/"+gone.Digest, nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete: %v %v", resp, err)
	}
	st, err = e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != 1 || st.Removed != 1 {
		t.Fatalf("third reconcile: %+v, %v", st, err)
	}
	if got := e.entry("scratch", "cowsay", "0.2.0"); got.Digest != newDigest || !slices.ContainsFunc(got.Files, func(f catalog.FileEntry) bool { return f.Path == "NOTES.txt" }) {
		t.Errorf("re-pointed tag: %+v", got)
	}
	if e.entry("olm", "etcd", gone.Tag) != nil {
		t.Errorf("deleted version still in the catalog")
	}
}

// TestReconcileDropsDanglingTags: a crash in the middle of a manifest delete
// leaves the tag naming a manifest that is gone. The reconciler removes such
// a version, and finishes: the tag names no readable version.
func TestReconcileDropsDanglingTags(t *testing.T) {
	e := newEnv(t, envOptions{lose: true})
	d := e.pushPackage("kudo", load(t, "kudo/cowsay/0.2.0"))
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Indexed != 1 {
		t.Fatalf("first reconcile: %+v, %v", st, err)
	}
	e.dangle("kudo/cowsay", d, "0.2.0")
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	if st, err := e.cat.Reconcile(ctx); err != nil || st.Removed != 1 {
		t.Fatalf("reconcile with a dangling tag: %+v, %v; want it removed", st, err)
	}
	if e.entry("kudo", "cowsay", "0.2.0") != nil {
		t.Error("the dangling version is still in the catalog")
	}
}

// TestReconcileRemovesDanglingTags: the tags a crash in the middle of a
// delete left dangling — a version and its cosign signature tag — are
// removed from the registry by the next reconciliation, and only they: every
// tag the registry lists then resolves, and the catalog equals the registry.
func TestReconcileRemovesDanglingTags(t *testing.T) {
	e := newEnv(t, envOptions{lose: true})
	keep := e.pushPackage("kudo", smallPackage(t, "p", "1.0.0"))
	gone := e.pushPackage("kudo", smallPackage(t, "p", "2.0.0"))
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Indexed != 2 {
		t.Fatalf("first reconcile: %+v, %v", st, err)
	}
	e.dangle("kudo/p", gone, "2.0.0", "sha256-"+digest.Digest(gone).Encoded()+".sig")
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Removed != 1 {
		t.Fatalf("reconcile with dangling tags: %+v, %v; want 2.0.0 removed", st, err)
	}
	if tags := e.tags("kudo/p"); !slices.Equal(tags, []string{"1.0.0"}) {
		t.Errorf("the registry lists %v after reconciling, want [1.0.0]: dangling tags are left", tags)
	}
	if got := e.entry("kudo", "p", "1.0.0"); got == nil || got.Digest != keep {
		t.Errorf("the intact version: %+v", got)
	}
	if e.entry("kudo", "p", "2.0.0") != nil {
		t.Error("the dangling version is still in the catalog")
	}
	if st, err := e.cat.Reconcile(e.ctx); err != nil || st.Indexed != 0 || st.Removed != 0 {
		t.Errorf("reconcile after the repair: %+v, %v; want nothing to do", st, err)
	}
}

// dangle leaves tags of repo naming manifest d, which is gone, as a crash in
// the middle of a delete by distribution did: it deletes the manifest (berth
// removes its tags then) and writes the tags again.
func (e *env) dangle(repoName, d string, tags ...string) {
	e.t.Helper()
	named, _ := reference.WithName(repoName)
	repo, err := e.reg.Namespace().Repository(e.ctx, named)
	if err != nil {
		e.t.Fatal(err)
	}
	ms, err := repo.Manifests(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := ms.Delete(e.ctx, digest.Digest(d)); err != nil {
		e.t.Fatal(err)
	}
	for _, tag := range tags {
		if err := repo.Tags(e.ctx).Tag(e.ctx, tag, ocispec.Descriptor{Digest: digest.Digest(d)}); err != nil {
			e.t.Fatal(err)
		}
	}
	listed := e.tags(repoName)
	for _, tag := range tags {
		if !slices.Contains(listed, tag) {
			e.t.Fatalf("%s is not left dangling: the registry lists %v", tag, listed)
		}
	}
}

// tags lists the tags the registry lists for repo, resolvable or not.
func (e *env) tags(repoName string) []string {
	e.t.Helper()
	named, _ := reference.WithName(repoName)
	repo, err := e.reg.Namespace().Repository(e.ctx, named)
	if err != nil {
		e.t.Fatal(err)
	}
	tags, err := repo.Tags(e.ctx).All(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return tags
}

// TestStoredStateIsOrderIndependent pushes the same versions in random
// orders, deletes the same subset, and requires identical package details,
// graphs and upgrade answers every time.
func TestStoredStateIsOrderIndependent(t *testing.T) {
	versions := loadRepository(t, "olm-community/etcd")
	seed := int64(20261121)
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	drop := map[string]bool{pkgformat.Tag(versions[1].Metadata.Version): true}
	var want []byte
	for round := 0; round < 4; round++ {
		e := newEnv(t, envOptions{})
		order := rng.Perm(len(versions))
		for _, i := range order {
			e.pushPackage("olm", versions[i])
		}
		e.waitFor("all versions", func() bool {
			p, err := e.cat.Package(e.ctx, all, "olm", "etcd")
			return err == nil && len(p.Versions) == len(versions)
		})
		for tag := range drop {
			d := e.entry("olm", "etcd", tag).Digest
			req, _ := http.NewRequest(http.MethodDelete, "http://"+e.host+"/v2/olm/etcd/manifests/"+d, nil)
			if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
				t.Fatalf("delete: %v %v", resp, err)
			}
		}
		e.waitFor("deletes", func() bool {
			p, err := e.cat.Package(e.ctx, all, "olm", "etcd")
			return err == nil && len(p.Versions) == len(versions)-len(drop)
		})
		got := snapshot(t, e)
		if want == nil {
			want = got
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d (order %v) differs:\n%s\nwant\n%s", round, order, got, want)
		}
	}
}

// snapshot renders what the catalog says about olm/etcd, minus index times.
func snapshot(t *testing.T, e *env) []byte {
	t.Helper()
	p, err := e.cat.Package(e.ctx, all, "olm", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Versions {
		p.Versions[i].Indexed = time.Time{}
	}
	doc := map[string]any{"package": p}
	for _, ch := range p.Channels {
		g, err := e.cat.Graph(e.ctx, all, "olm", "etcd", ch.Name)
		if err != nil {
			t.Fatal(err)
		}
		doc["graph-"+ch.Name] = g
		for _, v := range ch.Versions {
			u, err := e.cat.Upgrades(e.ctx, all, "olm", "etcd", ch.Name, v)
			if err != nil {
				t.Fatal(err)
			}
			doc["upgrades-"+ch.Name+"-"+v] = u
		}
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAccessHidesPackages checks that a package outside the caller's access
// is not found, as if it did not exist.
func TestAccessHidesPackages(t *testing.T) {
	e := newEnv(t, envOptions{})
	e.pushPackage("private", load(t, "kudo/cowsay/0.2.0"))
	e.waitFor("indexed", func() bool { return e.entry("private", "cowsay", "0.2.0") != nil })
	only := catalog.NamespaceAccess("public")
	// Hidden reads as missing: the same error as for a package that is not there.
	const hidden, hiddenVersion = "package private/cowsay: not found", "package private/cowsay has no version 0.2.0: not found"
	if _, err := e.cat.Version(e.ctx, all, "private", "cowsay-never", "0.2.0"); err == nil || strings.ReplaceAll(err.Error(), "cowsay-never", "cowsay") != hiddenVersion {
		t.Errorf("Version of a package never pushed: %v, want it to read as %q", err, hiddenVersion)
	}
	if _, err := e.cat.Package(e.ctx, only, "private", "cowsay"); !errors.Is(err, catalog.ErrNotFound) || err.Error() != hidden {
		t.Errorf("Package: %v, want %q", err, hidden)
	}
	if _, err := e.cat.Version(e.ctx, only, "private", "cowsay", "0.2.0"); !errors.Is(err, catalog.ErrNotFound) || err.Error() != hiddenVersion {
		t.Errorf("Version: %v, want %q", err, hiddenVersion)
	}
	res, err := e.cat.Search(e.ctx, catalog.Query{Text: "cowsay", Access: only})
	if err != nil || res.Total != 0 {
		t.Errorf("Search: %+v %v", res, err)
	}
	if _, err := e.cat.Package(e.ctx, all, "private", "cowsay"); err != nil {
		t.Errorf("with access: %v", err)
	}
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// tarball builds a gzipped tar of files, in name order, writing names as given.
func tarball(t testing.TB, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	return gz(t, buf.Bytes())
}

// TestUpgradesErrorsNameWhatIsMissing: an upgrade query of a package that
// exists names what is missing — the version in that channel, the version,
// or the channel — never the package.
func TestUpgradesErrorsNameWhatIsMissing(t *testing.T) {
	e := newEnv(t, envOptions{})
	versions := loadRepository(t, "olm-community/etcd")
	for _, p := range versions {
		e.pushPackage("olm", p)
	}
	e.waitFor("every version", func() bool {
		p, err := e.cat.Package(e.ctx, all, "olm", "etcd")
		return err == nil && len(p.Versions) == len(versions)
	})
	for _, tc := range []struct {
		channel, from string
		want          error
		message       string
	}{
		{"alpha", "0.9.0", catalog.ErrNotFound, "version 0.9.0 of olm/etcd is not in channel alpha (channels of 0.9.0: clusterwide-alpha, singlenamespace-alpha): not found"},
		{"clusterwide-alpha", "0.9.4", catalog.ErrNotFound, "version 0.9.4 of olm/etcd is not in channel clusterwide-alpha (channels of 0.9.4: singlenamespace-alpha): not found"},
		{"", "0.9.2-clusterwide", catalog.ErrNotFound, "version 0.9.2-clusterwide of olm/etcd is not in channel singlenamespace-alpha (channels of 0.9.2-clusterwide: clusterwide-alpha): not found"},
		{"alpha", "9.9.9", catalog.ErrNotFound, "package olm/etcd has no version 9.9.9: not found"},
		{"beta", "0.9.0", catalog.ErrNotFound, "package olm/etcd has no channel beta (channels: alpha, clusterwide-alpha, singlenamespace-alpha): not found"},
	} {
		t.Run(tc.channel+" "+tc.from, func(t *testing.T) {
			_, err := e.cat.Upgrades(e.ctx, all, "olm", "etcd", tc.channel, tc.from)
			if !errors.Is(err, tc.want) || err.Error() != tc.message {
				t.Errorf("Upgrades(%q, %q) error:\n %v\nwant %v:\n %s", tc.channel, tc.from, err, tc.want, tc.message)
			}
		})
	}
	if _, err := e.cat.Graph(e.ctx, all, "olm", "etcd", "beta"); err == nil || err.Error() != "package olm/etcd has no channel beta (channels: alpha, clusterwide-alpha, singlenamespace-alpha): not found" {
		t.Errorf("Graph of a missing channel: %v", err)
	}
}

// TestGraphMarksEdgesThatWidenPermissions checks every edge of a real
// package's graphs against the permissions API's diff of its two ends.
func TestGraphMarksEdgesThatWidenPermissions(t *testing.T) {
	e := newEnv(t, envOptions{})
	versions := loadRepository(t, "olm-community/aqua")
	for _, p := range versions {
		e.pushPackage("olm", p)
	}
	e.waitFor("every version", func() bool {
		p, err := e.cat.Package(e.ctx, all, "olm", "aqua")
		return err == nil && len(p.Versions) == len(versions)
	})
	p, err := e.cat.Package(e.ctx, all, "olm", "aqua")
	if err != nil {
		t.Fatal(err)
	}
	widening, not := 0, 0
	for _, ch := range p.Channels {
		g, err := e.cat.Graph(e.ctx, all, "olm", "aqua", ch.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range g.Nodes {
			perms, err := e.cat.Permissions(e.ctx, all, "olm", "aqua", n.Version, "")
			if err != nil {
				t.Fatal(err)
			}
			if n.Rating != perms.Review.Rating {
				t.Errorf("%s: node rated %s, the review %s", n.Version, n.Rating, perms.Review.Rating)
			}
		}
		for _, edge := range g.Edges {
			perms, err := e.cat.Permissions(e.ctx, all, "olm", "aqua", edge.To, edge.From)
			if err != nil {
				t.Fatal(err)
			}
			if perms.From != edge.From || perms.Change == nil {
				t.Fatalf("%s -> %s: from %q, change %v", edge.From, edge.To, perms.From, perms.Change)
			}
			if edge.WidensPermissions != perms.Change.Widens {
				t.Errorf("%s %s -> %s: edge widens %v, the diff %v (added %v)", ch.Name, edge.From, edge.To, edge.WidensPermissions, perms.Change.Widens, perms.Change.Added)
			}
			if edge.WidensPermissions {
				widening++
			} else {
				not++
			}
		}
	}
	if widening == 0 || not == 0 {
		t.Errorf("%d edges widen, %d do not: the fixture has both", widening, not)
	}
	// Overview is Package and Graph in one read.
	for _, channel := range []string{"", p.Channels[0].Name} {
		op, og, err := e.cat.Overview(e.ctx, all, "olm", "aqua", channel)
		if err != nil {
			t.Fatal(err)
		}
		want := channel
		if want == "" {
			want = p.DefaultChannel
		}
		g, err := e.cat.Graph(e.ctx, all, "olm", "aqua", want)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(op, p) || !reflect.DeepEqual(og, g) {
			t.Errorf("Overview(%q) = %+v, %+v\nwant %+v, %+v", channel, op, og, p, g)
		}
	}
	if _, _, err := e.cat.Overview(e.ctx, all, "olm", "aqua", "nope"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("Overview of a missing channel: %v", err)
	}
	if _, err := e.cat.Permissions(e.ctx, all, "olm", "aqua", "5.3.0", "9.9.9"); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("from a missing version: %v, want ErrNotFound", err)
	}
	if _, err := e.cat.Permissions(e.ctx, catalog.Access{}, "olm", "aqua", "5.3.0", ""); !errors.Is(err, catalog.ErrNotFound) {
		t.Errorf("without access: %v, want ErrNotFound", err)
	}
}
