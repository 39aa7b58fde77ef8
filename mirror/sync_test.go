package mirror_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/mirror"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
)

// feedSource is a source whose change feed a test writes; while
// packageErr is set, its catalog fails to read a package.
type feedSource struct {
	*source
	changes    []apiv1.Change
	packageErr error
}

func (f *feedSource) Package(ctx context.Context, ns, name string) (*apiv1.Package, error) {
	if f.packageErr != nil {
		return nil, f.packageErr
	}
	return f.source.Package(ctx, ns, name)
}

func (f *feedSource) Changes(_ context.Context, since int64, limit int) (*apiv1.Changes, error) {
	out := &apiv1.Changes{Changes: []apiv1.Change{}, Next: since}
	for _, c := range f.changes {
		if c.Seq > since && len(out.Changes) < limit {
			out.Changes = append(out.Changes, c)
			out.Next = c.Seq
		}
	}
	return out, nil
}

// add appends a change of charts/hello to the feed.
func (f *feedSource) add(action, tag string, d digest.Digest, status string) {
	f.changes = append(f.changes, apiv1.Change{Seq: int64(len(f.changes) + 1), Action: action, Namespace: "charts", Name: "hello",
		Version: tag, Digest: d.String(), Status: status})
}

// putVersions puts every version of the source in the feed.
func (f *feedSource) putVersions() {
	for _, v := range []string{"1.0.0", "1.1.0", "2.0.0"} {
		f.add(apiv1.ActionPut, v, f.digests[v], apiv1.StatusIndexed)
	}
}

type syncRun struct {
	t      *testing.T
	src    *feedSource
	target string
	state  string
}

func newSyncRun(t *testing.T) *syncRun {
	src := &feedSource{source: newSource(t)}
	return &syncRun{t: t, src: src, target: registrytest.NewBerth(t, registry.Options{}, nil), state: filepath.Join(t.TempDir(), "state.json")}
}

func (r *syncRun) sync(sel *mirror.Selection, prune bool) (*mirror.Summary, error) {
	return mirror.Sync(context.Background(), mirror.SyncOptions{Client: r.src.c, Source: r.src.host, Catalog: r.src,
		Target: r.target, Selection: sel, State: r.state, Prune: prune})
}

func (r *syncRun) mustSync(sel *mirror.Selection, prune bool) *mirror.Summary {
	r.t.Helper()
	sum, err := r.sync(sel, prune)
	if err != nil {
		r.t.Fatal(err)
	}
	return sum
}

func (r *syncRun) readState() mirror.SyncState {
	r.t.Helper()
	b, err := os.ReadFile(r.state)
	if err != nil {
		r.t.Fatal(err)
	}
	var s mirror.SyncState
	if err := json.Unmarshal(b, &s); err != nil {
		r.t.Fatal(err)
	}
	return s
}

// pushReferrers pushes n artifacts whose subject is d to charts/hello.
func pushReferrers(t *testing.T, s *source, d digest.Digest, n int) {
	t.Helper()
	ctx := context.Background()
	repo := s.c.Repository(s.host, "charts/hello")
	cfg := ocispec.DescriptorEmptyJSON
	if err := repo.Blobs().Push(ctx, cfg, bytes.NewReader(cfg.Data)); err != nil {
		t.Fatal(err)
	}
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: manifestSize(t, s, d)}
	for i := range n {
		m, _ := json.Marshal(ocispec.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: ocispec.MediaTypeImageManifest,
			ArtifactType: "application/vnd.example.note", Config: cfg, Layers: []ocispec.Descriptor{cfg},
			Subject: &subject, Annotations: map[string]string{"n": fmt.Sprint(i)}})
		desc := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(m), Size: int64(len(m))}
		if err := repo.Manifests().Push(ctx, desc, bytes.NewReader(m)); err != nil {
			t.Fatal(err)
		}
	}
}

func manifestSize(t *testing.T, s *source, d digest.Digest) int64 {
	t.Helper()
	desc, err := s.c.Repository(s.host, "charts/hello").Resolve(context.Background(), d.String())
	if err != nil {
		t.Fatal(err)
	}
	return desc.Size
}

// TestSyncSkipsAFailingVersion: a version with more than 1,024 referrers
// fails, and a change naming no digest is passed over; the other versions
// are synced, the state moves past everything and keeps the version
// pending, and the next sync retries it alone.
func TestSyncSkipsAFailingVersion(t *testing.T) {
	r := newSyncRun(t)
	pushReferrers(t, r.src.source, r.src.digests["2.0.0"], 1025)
	r.src.putVersions()
	r.src.add(apiv1.ActionPut, "3.0.0", "sha256:zz", apiv1.StatusIndexed)
	sum, err := r.sync(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Versions != 2 || len(sum.Failed) != 2 {
		t.Fatalf("sync: %+v", sum)
	}
	var reasons []string
	for _, f := range sum.Failed {
		reasons = append(reasons, f.Tag+": "+f.Reason)
	}
	got := strings.Join(reasons, "\n")
	for _, want := range []string{"2.0.0: ", "more than 1024 referrers", "3.0.0: ", `"sha256:zz"`} {
		if !strings.Contains(got, want) {
			t.Errorf("failures %q lack %q", got, want)
		}
	}
	if tags := tagsOf(t, r.src.c, r.target); tags["1.0.0"] != r.src.digests["1.0.0"] || tags["1.1.0"] != r.src.digests["1.1.0"] {
		t.Errorf("target tags %v", tags)
	}
	st := r.readState()
	if st.Cursor != int64(len(r.src.changes)) || len(st.Pending) != 1 || st.Pending[0].Tag != "2.0.0" || st.Pending[0].Action != apiv1.ActionPut {
		t.Fatalf("state: %+v", st)
	}
	again := r.mustSync(nil, false)
	if again.Versions != 0 || len(again.Failed) != 1 || again.Failed[0].Tag != "2.0.0" {
		t.Errorf("the next sync: %+v", again)
	}
	if st := r.readState(); len(st.Pending) != 1 {
		t.Errorf("the retried version left the state: %+v", st)
	}
}

// TestSyncIgnoresSourceEvents: events of tracked sources in the feed
// (published, of versions the feed puts too or of none, and failed,
// without a digest) copy nothing and fail nothing: a sync copies exactly
// the versions.
func TestSyncIgnoresSourceEvents(t *testing.T) {
	r := newSyncRun(t)
	source := func(version string, d digest.Digest, status, reason string) {
		r.src.changes = append(r.src.changes, apiv1.Change{Seq: int64(len(r.src.changes) + 1), Action: apiv1.ActionSource,
			Namespace: "charts", Name: "hello", Version: version, Digest: d.String(), Status: status, Reason: reason})
	}
	source("", "", apiv1.SourceFailed, apiv1.SourceReasonFetch)
	r.src.putVersions()
	source("1.0.0", r.src.digests["1.0.0"], apiv1.SourcePublished, "")
	source("9.9.9", digest.FromString("never pushed"), apiv1.SourcePublished, "")
	source("", "", apiv1.SourceFailed, apiv1.SourceReasonRefused)
	sum := r.mustSync(nil, false)
	if sum.Versions != 3 || len(sum.Failed) != 0 || len(sum.Deleted) != 0 {
		t.Fatalf("sync: %+v", sum)
	}
	tags := tagsOf(t, r.src.c, r.target)
	for tag := range tags {
		if _, cosign := signing.CosignSubject(tag); !cosign && r.src.digests[tag] == "" {
			t.Errorf("target tag %s is not a version of the source", tag)
		}
	}
	for v, d := range r.src.digests {
		if tags[v] != d {
			t.Errorf("target tag %s = %q, want %s", v, tags[v], d)
		}
	}
	if st := r.readState(); st.Cursor != int64(len(r.src.changes)) || len(st.Pending) != 0 {
		t.Errorf("state: %+v", st)
	}
}

// TestSyncStateSelection: a state file is of one selection; another
// selection, or an old state file that records none, is refused.
func TestSyncStateSelection(t *testing.T) {
	r := newSyncRun(t)
	r.src.putVersions()
	charts := &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}
	if sum := r.mustSync(charts, false); sum.Versions != 3 {
		t.Fatalf("first sync: %+v", sum)
	}
	for _, tc := range []struct {
		name string
		sel  *mirror.Selection
		want []string
	}{
		{"another namespace", &mirror.Selection{Packages: []mirror.Rule{{Namespace: "kudo"}}}, []string{`"namespace":"kudo"`, `"namespace":"charts"`, "another --state file"}},
		{"no selection", nil, []string{"every package (no selection)", `"namespace":"charts"`}},
		{"a narrower rule", &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts", Latest: 1}}}, []string{`"latest":1`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.sync(tc.sel, false)
			mirror.WantErr(t, err, append([]string{r.state}, tc.want...)...)
		})
	}
	old := `{"source": "` + r.src.host + `", "target": "` + r.target + `", "cursor": 3}`
	if err := os.WriteFile(r.state, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.sync(charts, false)
	mirror.WantErr(t, err, r.state, "does not say which selection")
}

// TestSyncDeleteThenPrune: a deletion seen without --prune is reported
// once and kept, and the next sync with --prune applies it though the
// cursor has moved past it, but leaves a tag re-pointed in the target. A
// cosign tag deleted upstream is not a version deleted.
func TestSyncDeleteThenPrune(t *testing.T) {
	r := newSyncRun(t)
	// A target that lets a version's tag be re-pointed.
	r.target = registrytest.NewBerth(t, registry.Options{AllowOverwrite: func(string) bool { return true }}, nil)
	r.src.putVersions()
	r.mustSync(nil, false)
	d := r.src.digests["1.0.0"]
	r.src.add(apiv1.ActionDelete, "1.1.0", r.src.digests["1.1.0"], apiv1.StatusIndexed)
	r.src.add(apiv1.ActionDelete, signing.SignatureTag(d), digest.FromString("sig"), apiv1.StatusIgnored)
	r.src.add(apiv1.ActionDelete, "sha256-"+d.Encoded(), digest.FromString("index"), apiv1.StatusIgnored)
	seen := r.mustSync(nil, false)
	if len(seen.Deleted) != 1 || seen.Deleted[0].Tag != "1.1.0" || !strings.Contains(seen.Deleted[0].Reason, "--prune") {
		t.Fatalf("deleted: %+v", seen.Deleted)
	}
	if quiet := r.mustSync(nil, false); len(quiet.Deleted) != 0 {
		t.Errorf("a deletion was reported twice: %+v", quiet.Deleted)
	}
	if _, ok := tagsOf(t, r.src.c, r.target)["1.1.0"]; !ok {
		t.Fatal("sync without --prune deleted a version")
	}
	// 2.0.0 deleted upstream, re-pointed here: left as it is, reported,
	// and not retried.
	r.src.add(apiv1.ActionDelete, "2.0.0", r.src.digests["2.0.0"], apiv1.StatusIndexed)
	repo := r.src.c.Repository(r.target, "charts/hello")
	if err := repo.Tag(context.Background(), ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: d, Size: manifestSize(t, r.src.source, d)}, "2.0.0"); err != nil {
		t.Fatal(err)
	}
	pruned := r.mustSync(nil, true)
	if pruned.Versions != 0 || len(pruned.Failed) != 0 || len(pruned.Deleted) != 2 || pruned.Deleted[0].Tag != "1.1.0" ||
		pruned.Deleted[0].Reason != "deleted in the source and here" || !strings.Contains(pruned.Deleted[1].Reason, "left as it is") {
		t.Errorf("with --prune: %+v", pruned)
	}
	if got := tagsOf(t, r.src.c, r.target)["2.0.0"]; got != d {
		t.Errorf("sync --prune deleted a tag re-pointed in the target: %q", got)
	}
	tags := tagsOf(t, r.src.c, r.target)
	if _, ok := tags["1.1.0"]; ok {
		t.Error("sync --prune left the version deleted upstream")
	}
	if tags[signing.SignatureTag(d)] == "" {
		t.Error("sync --prune deleted the signature tag of 1.0.0")
	}
	if st := r.readState(); len(st.Pending) != 0 {
		t.Errorf("pending after --prune: %+v", st.Pending)
	}
}

// TestSyncCarriesSignaturesAddedLater: a cosign signature pushed after its
// version was synced arrives with the next sync of the selection, which
// copies nothing else. When the source's catalog cannot say which version
// it is of, it is reported, kept pending and carried by the sync after.
func TestSyncCarriesSignaturesAddedLater(t *testing.T) {
	r := newSyncRun(t)
	r.src.putVersions()
	charts := &mirror.Selection{Packages: []mirror.Rule{{Namespace: "charts"}}}
	r.mustSync(charts, false)
	d := r.src.digests["2.0.0"]
	sigTag := signing.SignatureTag(d)
	if _, ok := tagsOf(t, r.src.c, r.target)[sigTag]; ok {
		t.Fatal("2.0.0 is signed already")
	}
	if _, err := r.src.c.Sign(context.Background(), mustRef(t, r.src.host+"/charts/hello:2.0.0"), r.src.keys.Signer, client.SignOptions{}); err != nil {
		t.Fatal(err)
	}
	sigDigest := tagsOf(t, r.src.c, r.src.host)[sigTag]
	r.src.add(apiv1.ActionPut, sigTag, sigDigest, apiv1.StatusIgnored)
	r.src.packageErr = errors.New("catalog unavailable")
	failed := r.mustSync(charts, false)
	if len(failed.Failed) != 1 || failed.Failed[0].Tag != sigTag || !strings.Contains(failed.Failed[0].Reason, "catalog unavailable") {
		t.Fatalf("sync while the catalog fails: %+v", failed)
	}
	if st := r.readState(); st.Cursor != int64(len(r.src.changes)) || len(st.Pending) != 1 || st.Pending[0].Tag != sigTag {
		t.Fatalf("state: %+v", st)
	}
	r.src.packageErr = nil
	sum := r.mustSync(charts, false)
	if sum.Versions != 0 || len(sum.Failed) != 0 || len(sum.Deleted) != 0 {
		t.Errorf("sync: %+v", sum)
	}
	if got := tagsOf(t, r.src.c, r.target)[sigTag]; got != sigDigest {
		t.Errorf("the target's %s names %q, want %s", sigTag, got, sigDigest)
	}
	if st := r.readState(); len(st.Pending) != 0 {
		t.Errorf("pending after the signature arrived: %+v", st.Pending)
	}
}
