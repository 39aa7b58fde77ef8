package e2e

import (
	"archive/tar"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/mirror"
)

// mirrorSource is a berth holding KUDO and OLM fixtures, signed by the real
// cosign in both schemes and attested once.
type mirrorSource struct {
	s  *server
	kp keyPair
	// signedTag, signedReferrer and attested are kudo/kafka versions (tags).
	signedTag, signedReferrer string
}

// startMirrorSource starts the source berth of the mirror tests.
func startMirrorSource(t *testing.T) *mirrorSource {
	t.Helper()
	kp := cosignKeyPair(t)
	cfg := trustConfig(t, policy("*/*", kp.pub, false))
	src := &mirrorSource{s: startServer(t, "", "--config", cfg), kp: kp}
	for _, v := range []string{"2.4.0-1.2.0", "2.4.0-1.2.1", "2.4.1-1.2.1", "2.5.0-1.3.0"} {
		pushVersion(t, src.s, v, "kudo/kafka")
	}
	berth(t, "", "push", filepath.Join(fixtures, "olm-community", "etcd"), src.s.addr+"/community")
	src.signedTag, src.signedReferrer = "2.5.0_1.3.0", "2.4.1_1.2.1"
	tagDigest := mirrorDigest(t, src.s, "kudo/kafka", src.signedTag)
	cosign(t, kp.dir, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", src.s.addr+"/kudo/kafka@"+tagDigest)
	predicate := filepath.Join(t.TempDir(), "provenance.json")
	if err := os.WriteFile(predicate, []byte(`{"buildType":"https://example.com/mirror-e2e","builder":{"id":"https://ci.example.com"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cosign(t, kp.dir, "attest", "--key", kp.key, "--tlog-upload=false", "--yes", "--type", "slsaprovenance",
		"--predicate", predicate, src.s.addr+"/kudo/kafka@"+tagDigest)
	refDigest := mirrorDigest(t, src.s, "kudo/kafka", src.signedReferrer)
	if r := runEnv(t, []string{"COSIGN_EXPERIMENTAL=1"}, cosignBin, "sign", "--key", kp.key, "--tlog-upload=false", "--yes",
		"--registry-referrers-mode=oci-1-1", src.s.addr+"/kudo/kafka@"+refDigest); r.code != 0 {
		t.Fatalf("cosign sign --registry-referrers-mode=oci-1-1: %s", r.stderr)
	}
	waitVerified(t, src.s, "kudo/kafka", src.signedTag, true, func(v apiv1.Version) bool { return len(v.Attestations) == 1 })
	waitVerified(t, src.s, "kudo/kafka", src.signedReferrer, true, nil)
	return src
}

// mirrorDigest is the digest the catalog gives a version.
func mirrorDigest(t *testing.T, s *server, repo, version string) string {
	t.Helper()
	v, code := versionDoc(t, s, repo, version)
	if code != http.StatusOK {
		t.Fatalf("%s %s: %d", repo, version, code)
	}
	return v.Digest
}

// mirrorSelection writes a selection: a namespace within a version range,
// and an OLM channel from a version to its head.
func mirrorSelection(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "selection.yaml")
	doc := `packages:
  - namespace: kudo
    versions: ">=2.4.1"
  - repository: community/etcd
    channel: singlenamespace-alpha
    from: 0.9.2
`
	if err := os.WriteFile(file, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// summaryOf decodes a --format json summary.
func summaryOf(t *testing.T, out string) mirror.Summary {
	t.Helper()
	var s mirror.Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary: %v\n%s", err, out)
	}
	return s
}

// selectedView is the part of a registry view the selection covers: the
// versions and cosign tags of kudo/* and community/etcd.
func selectedView(view map[string]string, versions map[string]bool) map[string]string {
	out := map[string]string{}
	for k, d := range view {
		repo, tag, _ := strings.Cut(k, ":")
		// Cosign's tags, not the referrers tag schema (sha256-<hex>) that
		// oras-go writes into a registry without the referrers API.
		cosignTag := strings.HasPrefix(tag, "sha256-") && strings.Contains(tag, ".")
		if versions[k] || (cosignTag && (repo == "kudo/kafka" || repo == "community/etcd")) {
			out[k] = d
		}
	}
	return out
}

// TestMirrorAirGap: a selection (a namespace within a range, an OLM
// channel from a version) exported from a berth with signatures in both
// schemes and an attestation, imported into a second berth and into
// distribution's registry: every digest identical, cosign verify passes
// offline on both, the far berth shows the versions verified and answers
// upgrades as the source does; oras reads the archive; a delta from the
// far side's inventory carries only the new blobs.
func TestMirrorAirGap(t *testing.T) {
	src := startMirrorSource(t)
	work := t.TempDir()
	archive := filepath.Join(work, "site-1")
	exp := summaryOf(t, berth(t, work, "mirror", "export", "--images=false", "--source", src.s.addr, "--selection", mirrorSelection(t),
		"-o", archive, "--key", src.kp.key, "--format", "json").stdout)

	m, _, err := mirror.ReadManifest(filepath.Join(archive, mirror.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, v := range m.Versions {
		want[v.Repository+":"+v.Tag] = true
	}
	wantVersions := []string{"community/etcd:0.9.2", "community/etcd:0.9.4", "kudo/kafka:2.4.1_1.2.1", "kudo/kafka:2.5.0_1.3.0"}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, wantVersions) || exp.Versions != len(wantVersions) {
		t.Fatalf("exported versions %v (summary %d), want %v", got, exp.Versions, wantVersions)
	}
	cosign(t, work, "verify-blob", "--key", src.kp.pub, "--signature", filepath.Join(archive, mirror.SignatureFile),
		"--insecure-ignore-tlog=true", filepath.Join(archive, mirror.ManifestFile))
	berth(t, work, "mirror", "verify", archive, "--archive-key", src.kp.pub)

	srcView := selectedView(registryView(t, src.s), want)
	if len(srcView) < len(wantVersions)+2 {
		t.Fatalf("source view %v lacks the signature tags", srcView)
	}

	// Into a second berth, with the same trust policy.
	far := startServer(t, "", "--config", trustConfig(t, policy("*/*", src.kp.pub, false)))
	imp := summaryOf(t, berth(t, work, "mirror", "import", archive, far.addr, "--archive-key", src.kp.pub, "--format", "json").stdout)
	if imp.Versions != len(wantVersions) || len(imp.Failed) != 0 || len(imp.Quarantined) != 0 {
		t.Fatalf("import into berth: %+v", imp)
	}
	if got := selectedView(registryView(t, far), want); !maps.Equal(got, srcView) {
		t.Errorf("far berth holds %v, want the source's %v", got, srcView)
	}
	waitVerified(t, far, "kudo/kafka", src.signedTag, true, func(v apiv1.Version) bool { return len(v.Attestations) == 1 })
	waitVerified(t, far, "kudo/kafka", src.signedReferrer, true, nil)
	var srcUp, farUp apiv1.Upgrades
	getJSON(t, src.s, "/api/v1/packages/community/etcd/upgrades?from=0.9.2&channel=singlenamespace-alpha", &srcUp)
	if code := getJSON(t, far, "/api/v1/packages/community/etcd/upgrades?from=0.9.2&channel=singlenamespace-alpha", &farUp); code != http.StatusOK ||
		!slices.Equal(srcUp.Path, farUp.Path) || srcUp.Head != farUp.Head {
		t.Errorf("upgrades on the far berth: %d %+v, the source's %+v", code, farUp, srcUp)
	}
	tagDigest := srcView["kudo/kafka:"+src.signedTag]
	refDigest := srcView["kudo/kafka:"+src.signedReferrer]
	cosign(t, work, "verify", "--key", src.kp.pub, "--insecure-ignore-tlog=true", far.addr+"/kudo/kafka@"+tagDigest)
	cosign(t, work, "verify", "--key", src.kp.pub, "--insecure-ignore-tlog=true", "--experimental-oci11", far.addr+"/kudo/kafka@"+refDigest)
	cosign(t, work, "verify-attestation", "--key", src.kp.pub, "--insecure-ignore-tlog=true", "--type", "slsaprovenance", far.addr+"/kudo/kafka@"+tagDigest)

	// Into distribution's registry.
	reg := startUpstreamRegistry(t, "")
	berth(t, work, "mirror", "import", archive, reg.addr)
	if got := selectedView(registryView(t, reg), want); !maps.Equal(got, srcView) {
		t.Errorf("upstream registry holds %v, want the source's %v", got, srcView)
	}
	cosign(t, work, "verify", "--key", src.kp.pub, "--insecure-ignore-tlog=true", reg.addr+"/kudo/kafka@"+tagDigest)
	cosign(t, work, "verify", "--key", src.kp.pub, "--insecure-ignore-tlog=true", "--experimental-oci11", reg.addr+"/kudo/kafka@"+refDigest)

	// Another tool reads the archive: oras copies a version with its referrers out of the layout.
	other := startUpstreamRegistry(t, "")
	oras(t, work, "cp", "-r", "--from-oci-layout", archive+"@"+refDigest, "--to-plain-http", other.addr+"/kudo/kafka:"+src.signedReferrer)
	if got := registryView(t, other)["kudo/kafka:"+src.signedReferrer]; got != refDigest {
		t.Errorf("oras cp from the archive: %q, want %s", got, refDigest)
	}
	cosign(t, work, "verify", "--key", src.kp.pub, "--insecure-ignore-tlog=true", "--experimental-oci11", other.addr+"/kudo/kafka@"+refDigest)

	// A delta: three new versions upstream; the far side's inventory; a second export holds only their blobs.
	before := map[string]bool{}
	for _, en := range m.Content {
		before[en.Digest.String()] = true
	}
	added := []string{"2.5.0-1.3.1", "2.5.0-1.3.2", "2.5.1-1.3.2"}
	for _, v := range added {
		d := pushVersion(t, src.s, v, "kudo/kafka")
		cosign(t, src.kp.dir, "sign", "--key", src.kp.key, "--tlog-upload=false", "--yes", src.s.addr+"/kudo/kafka@"+d)
	}
	inv := filepath.Join(work, "inv.json")
	var invSum struct {
		Registry     string `json:"registry"`
		Repositories int    `json:"repositories"`
		Digests      int    `json:"digests"`
		File         string `json:"file"`
		Digest       string `json:"digest"`
	}
	if err := json.Unmarshal([]byte(berth(t, work, "mirror", "inventory", far.addr, "-o", inv, "--format", "json").stdout), &invSum); err != nil {
		t.Fatalf("inventory --format json: %v", err)
	}
	if invSum.Registry != far.addr || invSum.File != inv || invSum.Repositories == 0 || invSum.Digests == 0 || !strings.HasPrefix(invSum.Digest, "sha256:") {
		t.Errorf("inventory --format json: %+v", invSum)
	}
	delta := filepath.Join(work, "site-2.tar")
	berth(t, work, "mirror", "export", "--images=false", "--source", src.s.addr, "--selection", mirrorSelection(t), "-o", delta, "--inventory", inv)
	a, err := mirror.OpenArchive(delta)
	if err != nil {
		t.Fatal(err)
	}
	dm := a.Manifest()
	a.Close()
	var carried, newBlobs int64
	for _, en := range dm.Content {
		if en.Carried && before[en.Digest.String()] {
			t.Errorf("the delta carries %s, which the far side has", en.Digest)
		}
		if en.Carried {
			carried += en.Size
		}
		if !before[en.Digest.String()] {
			newBlobs += en.Size
		}
	}
	if carried != newBlobs || len(dm.Versions) != len(wantVersions)+len(added) {
		t.Errorf("delta: carries %d bytes, the new content is %d bytes; %d versions", carried, newBlobs, len(dm.Versions))
	}
	st, err := os.Stat(delta)
	if err != nil {
		t.Fatal(err)
	}
	// The tar adds a 512-byte header per entry, padding, index.json and the manifest.
	if limit := newBlobs + int64(len(dm.Content))*1024 + 64<<10 + int64(len(mustJSON(t, dm)))*2; st.Size() > limit {
		t.Errorf("delta archive is %d bytes, more than %d for %d bytes of new content", st.Size(), limit, newBlobs)
	}
	imp2 := summaryOf(t, berth(t, work, "mirror", "import", delta, far.addr, "--format", "json").stdout)
	if imp2.Versions != len(added) || len(imp2.Failed) != 0 {
		t.Errorf("delta import: %+v", imp2)
	}
	for _, v := range added {
		waitVerified(t, far, "kudo/kafka", strings.ReplaceAll(v, "-", "_"), true, nil)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMirrorImportResumesAndRefusesCorruption: an import killed with
// SIGKILL halfway tagged nothing early, and run again finishes, sending
// only what the target lacked; an archive with one flipped byte gets an
// error naming the digest, and that version is not tagged.
func TestMirrorImportResumesAndRefusesCorruption(t *testing.T) {
	src := startMirrorSource(t)
	work := t.TempDir()
	archive := filepath.Join(work, "site.tar")
	berth(t, work, "mirror", "export", "--images=false", "--source", src.s.addr, "--namespace", "kudo", "--namespace", "community", "-o", archive)
	a, err := mirror.OpenArchive(archive)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Manifest()
	a.Close()

	// Killed halfway.
	target := startServer(t, "")
	cmd := exec.Command(berthBin, "mirror", "import", archive, target.addr, "--concurrency", "1", "--format", "json")
	cmd.Dir = work
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(target.data, "registry", "docker", "registry", "v2", "blobs", "sha256")
	deadline := time.Now().Add(30 * time.Second)
	for countFiles(blobs) < 10 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("the import finished before it was killed; the archive is too small to test a kill")
	}
	// Every version tagged has its signature tags too: nothing was tagged early.
	view := settledView(t, target, m)
	tagged := 0
	for _, v := range m.Versions {
		d, ok := view[v.Repository+":"+v.Tag]
		if !ok {
			continue
		}
		tagged++
		if d != v.Digest.String() {
			t.Errorf("%s:%s is %s, want %s", v.Repository, v.Tag, d, v.Digest)
		}
		for _, tag := range v.Tags {
			if view[v.Repository+":"+tag.Tag] != tag.Digest.String() {
				t.Errorf("%s:%s was tagged before its signature tag %s", v.Repository, v.Tag, tag.Tag)
			}
		}
	}
	if tagged == len(m.Versions) {
		t.Fatalf("every version was tagged before the kill")
	}
	// The target's files of the archive's digests: berth also writes files of
	// its own as it indexes (OLM bundle and catalog images, docs/olm.md).
	inArchive := map[string]bool{}
	for _, v := range m.Versions {
		for _, d := range v.Needs {
			inArchive[d.String()] = true
		}
	}
	held := countDigests(blobs, inArchive)
	again := summaryOf(t, berth(t, work, "mirror", "import", archive, target.addr, "--format", "json").stdout)
	if len(again.Failed) != 0 || again.Versions != len(m.Versions)-tagged {
		t.Fatalf("the import run again: %+v, %d of %d versions were tagged before", again, tagged, len(m.Versions))
	}
	// What the rerun sent, the target lacked: each is a new file, but for
	// digests several repositories share (a new link to a file already
	// there) and the one blob in flight at the kill.
	repos := map[string]map[string]bool{}
	for _, v := range m.Versions {
		for _, d := range v.Needs {
			if repos[d.String()] == nil {
				repos[d.String()] = map[string]bool{}
			}
			repos[d.String()][v.Repository] = true
		}
	}
	shared := 0
	for _, rs := range repos {
		if len(rs) > 1 {
			shared++
		}
	}
	sent, gained := again.Blobs+again.Manifests, countDigests(blobs, inArchive)-held
	if sent < gained || sent > gained+shared+1 {
		t.Errorf("the rerun sent %d blobs and manifests; the target gained %d files (%d digests are shared): it re-sent what it had", sent, gained, shared)
	}
	if again.BytesSkipped == 0 {
		t.Errorf("the rerun skipped nothing: %+v", again)
	}

	// One flipped byte in one version's content layer.
	var victim mirror.Version
	for _, v := range m.Versions {
		if v.Repository == "kudo/kafka" && len(v.Tags) == 0 && len(v.Referrers) == 0 {
			victim = v
			break
		}
	}
	// Its largest blob, which no other version needs.
	var layer string
	var size int64
	for _, en := range m.Content {
		if slices.Contains(victim.Needs, en.Digest) && !en.Manifest && len(repos[en.Digest.String()]) == 1 && en.Size > size {
			layer, size = en.Digest.Encoded(), en.Size
		}
	}
	corrupt := filepath.Join(work, "corrupt.tar")
	flipByte(t, archive, corrupt, "blobs/sha256/"+layer)
	fresh := startServer(t, "")
	r := run(t, work, berthBin, "mirror", "import", corrupt, fresh.addr, "--format", "json")
	if r.code == 0 {
		t.Fatalf("an import of a corrupt archive succeeded:\n%s", r.stdout)
	}
	bad := summaryOf(t, r.stdout)
	if len(bad.Failed) != 1 || bad.Failed[0].Tag != victim.Tag || !strings.Contains(bad.Failed[0].Reason, layer) {
		t.Errorf("failed: %+v, want %s:%s naming %s", bad.Failed, victim.Repository, victim.Tag, layer)
	}
	freshView := registryView(t, fresh)
	if _, ok := freshView[victim.Repository+":"+victim.Tag]; ok {
		t.Errorf("the corrupt version %s:%s was tagged", victim.Repository, victim.Tag)
	}
	if bad.Versions != len(m.Versions)-1 {
		t.Errorf("imported %d versions, want every other one (%d)", bad.Versions, len(m.Versions)-1)
	}

	importWithoutAPart(t, src, work)
}

// importWithoutAPart: a split archive imported with one part missing
// imports every version whose content is in the other parts, reports the
// others naming the part, and exits 1; run again with every part, it
// imports the rest.
func importWithoutAPart(t *testing.T, src *mirrorSource, work string) {
	t.Helper()
	split := filepath.Join(work, "split.tar")
	exp := summaryOf(t, berth(t, work, "mirror", "export", "--images=false", "--source", src.s.addr, "--namespace", "kudo", "--namespace", "community",
		"-o", split, "--max-size", "64KiB", "--format", "json").stdout)
	a, err := mirror.OpenArchive(exp.Files...)
	if err != nil {
		t.Fatal(err)
	}
	m := a.Manifest()
	a.Close()
	part := map[string]int{}
	for _, en := range m.Content {
		part[en.Digest.String()] = en.Part
	}
	needs := map[int]map[string]bool{} // part → versions needing it
	for _, v := range m.Versions {
		for _, d := range v.Needs {
			if needs[part[d.String()]] == nil {
				needs[part[d.String()]] = map[string]bool{}
			}
			needs[part[d.String()]][v.Repository+":"+v.Tag] = true
		}
	}
	lose := 0
	for n := 1; n < len(m.Parts); n++ {
		if len(needs[n]) > 0 && len(needs[n]) < len(m.Versions) {
			lose = n
			break
		}
	}
	if lose == 0 {
		t.Fatalf("no part of %d holds the content of some versions only", len(m.Parts))
	}
	target := startServer(t, "")
	args := append([]string{"mirror", "import"}, slices.Delete(slices.Clone(exp.Files), lose-1, lose)...)
	r := run(t, work, berthBin, append(args, target.addr, "--format", "json")...)
	if r.code == 0 {
		t.Fatalf("an import without part %d exited 0:\n%s", lose, r.stdout)
	}
	got := summaryOf(t, r.stdout)
	if got.Versions != len(m.Versions)-len(needs[lose]) || len(got.Failed) != len(needs[lose]) || len(got.Damaged) != 1 {
		t.Fatalf("import without part %d of %d: %+v", lose, len(m.Parts), got)
	}
	for _, f := range got.Failed {
		if !needs[lose][f.Repository+":"+f.Tag] || !strings.Contains(f.Reason, filepath.Base(m.Parts[lose-1].File)+") is missing") {
			t.Errorf("failed: %+v", f)
		}
	}
	view := registryView(t, target)
	for _, v := range m.Versions {
		k := v.Repository + ":" + v.Tag
		if _, ok := view[k]; ok == needs[lose][k] {
			t.Errorf("%s tagged: %v; it needs the missing part: %v", k, ok, needs[lose][k])
		}
	}
	rest := summaryOf(t, berth(t, work, append(append([]string{"mirror", "import"}, exp.Files...), target.addr, "--format", "json")...).stdout)
	if rest.Versions != len(needs[lose]) || len(rest.Failed)+len(rest.Damaged) != 0 {
		t.Errorf("the import with every part: %+v", rest)
	}
}

// countFiles counts the files under dir.
func countFiles(dir string) int {
	n := 0
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			n++
		}
		return nil
	})
	return n
}

// settledView is the registry view of the tags of m's versions once it has
// not changed for half a second: the server may still write a request that
// a killed client had sent, and under load that takes a while.
func settledView(t *testing.T, s *server, m *mirror.Manifest) map[string]string {
	t.Helper()
	ofVersions := func() map[string]string {
		view := registryView(t, s)
		out := map[string]string{}
		for _, v := range m.Versions {
			for _, tag := range append([]string{v.Tag}, tagNames(v.Tags)...) {
				if d, ok := view[v.Repository+":"+tag]; ok {
					out[v.Repository+":"+tag] = d
				}
			}
		}
		return out
	}
	view := ofVersions()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		next := ofVersions()
		if maps.Equal(next, view) {
			break
		}
		view = next
	}
	return view
}

func tagNames(tags []mirror.Tag) []string {
	out := make([]string, len(tags))
	for i, tag := range tags {
		out[i] = tag.Tag
	}
	return out
}

// countDigests counts the blobs of the registry storage's blobs/sha256
// directory dir whose digest is in want.
func countDigests(dir string, want map[string]bool) int {
	n := 0
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "data" && want["sha256:"+filepath.Base(filepath.Dir(p))] {
			n++
		}
		return nil
	})
	return n
}

// flipByte copies the tar src to dst with the middle byte of entry name flipped.
func flipByte(t *testing.T, src, dst, name string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	found := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b[len(b)/2] ^= 0xff
			found = true
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !found {
		t.Fatalf("%s has no entry %s", src, name)
	}
}

// TestMirrorSync: sync copies a selection with its signatures, a sync with
// nothing new is a no-op, a new version upstream follows, and a deletion
// upstream is reported, then applied with --prune.
func TestMirrorSync(t *testing.T) {
	src := startMirrorSource(t)
	work := t.TempDir()
	dst := startServer(t, "", "--config", trustConfig(t, policy("*/*", src.kp.pub, false)))
	state := filepath.Join(work, "state.json")
	sync := func(extra ...string) mirror.Summary {
		t.Helper()
		args := append([]string{"mirror", "sync", src.s.addr, dst.addr, "--state", state, "--namespace", "kudo", "--format", "json"}, extra...)
		return summaryOf(t, berth(t, work, args...).stdout)
	}
	first := sync()
	if first.Versions != 4 || len(first.Failed) != 0 {
		t.Fatalf("first sync: %+v", first)
	}
	kudoOnly := map[string]bool{}
	for _, v := range []string{"2.4.0_1.2.0", "2.4.0_1.2.1", "2.4.1_1.2.1", "2.5.0_1.3.0"} {
		kudoOnly["kudo/kafka:"+v] = true
	}
	srcView := selectedView(registryView(t, src.s), kudoOnly)
	if got := registryView(t, dst); !maps.Equal(selectedView(got, kudoOnly), srcView) {
		t.Errorf("after sync the target holds %v, want %v", got, srcView)
	}
	if _, ok := registryView(t, dst)["community/etcd:0.9.4"]; ok {
		t.Errorf("sync copied community/etcd, outside the selection")
	}
	waitVerified(t, dst, "kudo/kafka", src.signedTag, true, nil)

	// The same state file with another selection is refused.
	other := run(t, work, berthBin, "mirror", "sync", src.s.addr, dst.addr, "--state", state, "--namespace", "community")
	if other.code == 0 || !strings.Contains(other.stderr, `"namespace":"community"`) || !strings.Contains(other.stderr, `"namespace":"kudo"`) {
		t.Errorf("a sync of another selection with the same state file: exit %d, %s", other.code, other.stderr)
	}

	// A signature added upstream after its version was synced follows.
	unsigned := mirrorDigest(t, src.s, "kudo/kafka", "2.4.0_1.2.0")
	cosign(t, src.kp.dir, "sign", "--key", src.kp.key, "--tlog-upload=false", "--yes", src.s.addr+"/kudo/kafka@"+unsigned)
	waitVerified(t, src.s, "kudo/kafka", "2.4.0_1.2.0", true, nil)
	sigTag := "kudo/kafka:sha256-" + strings.TrimPrefix(unsigned, "sha256:") + ".sig"
	if signed := sync(); signed.Versions != 0 || len(signed.Failed) != 0 || len(signed.Deleted) != 0 {
		t.Errorf("a sync after a signature upstream: %+v", signed)
	}
	if got, want := registryView(t, dst)[sigTag], registryView(t, src.s)[sigTag]; got != want || want == "" {
		t.Errorf("the signature added upstream: target has %q, source %q", got, want)
	}

	noop := sync()
	if noop.Versions != 0 || noop.Blobs != 0 || noop.Manifests != 0 || noop.Seconds > 1 {
		t.Errorf("a sync with nothing new: %+v", noop)
	}

	d := pushVersion(t, src.s, "2.5.0-1.3.1", "kudo/kafka")
	if next := sync(); next.Versions != 1 || registryView(t, dst)["kudo/kafka:2.5.0_1.3.1"] != d {
		t.Errorf("after a new version upstream: %+v", next)
	}

	req, _ := http.NewRequest(http.MethodDelete, src.s.url()+"/v2/kudo/kafka/manifests/"+d, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delete upstream: %d", resp.StatusCode)
	}
	waitUntil(t, src.s, "the deletion in the change feed", func() bool {
		_, code := versionDoc(t, src.s, "kudo/kafka", "2.5.0_1.3.1")
		return code == http.StatusNotFound
	})
	reported := sync()
	if len(reported.Deleted) != 1 || reported.Deleted[0].Tag != "2.5.0_1.3.1" {
		t.Errorf("deleted upstream, reported: %+v", reported.Deleted)
	}
	if registryView(t, dst)["kudo/kafka:2.5.0_1.3.1"] != d {
		t.Errorf("sync without --prune deleted the version in the target")
	}
	// The deletion is behind the cursor now; the state file keeps it, and --prune applies it.
	pruned := sync("--prune")
	if len(pruned.Deleted) != 1 {
		t.Errorf("with --prune: %+v", pruned.Deleted)
	}
	if _, ok := registryView(t, dst)["kudo/kafka:2.5.0_1.3.1"]; ok {
		t.Errorf("sync --prune left the version deleted upstream")
	}
}
