package main

// Tests of the provenance benchmarks' pure parts: flags, the manifests they
// push, the reading of referrers listings, the trust configuration. Nothing
// here starts a server, runs cosign or times anything.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/config"
)

func TestParseCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  string
	}{
		{"1,100,5000", []int{1, 100, 5000}, ""},
		{" 5000, 1 ,100", []int{1, 100, 5000}, ""},
		{"7", []int{7}, ""},
		{"", nil, ""},
		{"none", nil, ""},
		{"1,0", nil, `"0" is not a positive count`},
		{"1,-3", nil, `"-3" is not a positive count`},
		{"1,,2", nil, `"" is not a positive count`},
		{"ten", nil, `"ten" is not a positive count`},
		{"100,1,100", nil, "100 given twice"},
	} {
		got, err := parseCounts(tc.in)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("parseCounts(%q) = %v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseCounts(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestProvenanceValidate(t *testing.T) {
	valid := func() provenanceOptions {
		return provenanceOptions{referrers: "1,100,5000", requests: 500, pushConcurrency: 4, signs: 100, referrerSigns: 100, timeout: 30 * time.Second}
	}
	o := valid()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	if !slices.Equal(o.counts, []int{1, 100, 5000}) {
		t.Errorf("counts = %v", o.counts)
	}
	for _, tc := range []struct {
		name   string
		change func(*provenanceOptions)
		err    string
	}{
		{"no requests", func(o *provenanceOptions) { o.requests = 0 }, "-provenance-requests must be at least 1"},
		{"no concurrency", func(o *provenanceOptions) { o.pushConcurrency = 0 }, "-provenance-push-concurrency must be at least 1"},
		{"negative signs", func(o *provenanceOptions) { o.signs = -1 }, "must not be negative"},
		{"no timeout", func(o *provenanceOptions) { o.timeout = 0 }, "-provenance-timeout must be positive"},
		{"bad counts", func(o *provenanceOptions) { o.referrers = "1,x" }, `-provenance-referrers: "x" is not a positive count`},
		{"nothing", func(o *provenanceOptions) { o.referrers, o.signs, o.referrerSigns = "none", 0, 0 }, "nothing to run"},
	} {
		o := valid()
		tc.change(&o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: validate = %v, want %q", tc.name, err, tc.err)
		}
	}
	o = valid()
	o.referrers, o.referrerSigns = "none", 0
	if err := o.validate(); err != nil || o.counts != nil {
		t.Errorf("signs only: %v, counts %v", err, o.counts)
	}
}

func TestListingRequests(t *testing.T) {
	for _, tc := range []struct{ n, requests, want int }{
		{1, 500, 500},
		{100, 500, 500},
		{2000, 500, 500},
		{5000, 500, 200},
		{5000, 50, 50},
		{2_000_000, 500, 1},
	} {
		if got := listingRequests(tc.n, tc.requests); got != tc.want {
			t.Errorf("listingRequests(%d, %d) = %d, want %d", tc.n, tc.requests, got, tc.want)
		}
	}
}

func TestReferrerManifests(t *testing.T) {
	subjectBody, err := subjectManifest(100)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := subjectManifest(5000)
	if bytes.Equal(subjectBody, other) {
		t.Error("the subjects of two rows are the same manifest")
	}
	var subject ocispec.Manifest
	if err := json.Unmarshal(subjectBody, &subject); err != nil {
		t.Fatal(err)
	}
	empty := ocispec.Descriptor{MediaType: ocispec.MediaTypeEmptyJSON, Digest: ocispec.DescriptorEmptyJSON.Digest, Size: 2}
	if subject.SchemaVersion != 2 || subject.MediaType != ocispec.MediaTypeImageManifest || subject.Subject != nil ||
		!reflect.DeepEqual(subject.Config, empty) || len(subject.Layers) != 1 || !reflect.DeepEqual(subject.Layers[0], empty) {
		t.Errorf("subject manifest: %s", subjectBody)
	}
	if d := emptyDescriptor(); d.Digest != ocispec.DescriptorEmptyJSON.Digest || d.Size != int64(len(emptyJSON)) {
		t.Errorf("empty descriptor %+v, want the OCI one", d)
	}

	subjectDesc := descriptor(ocispec.MediaTypeImageManifest, subjectBody)
	digests := map[digest.Digest]bool{}
	filtered := 0
	const n = 5000
	for i := range n {
		body, err := referrerManifest(subjectDesc, i)
		if err != nil {
			t.Fatal(err)
		}
		digests[digest.FromBytes(body)] = true
		var m ocispec.Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		if m.Subject == nil || m.Subject.Digest != subjectDesc.Digest || m.Subject.Size != int64(len(subjectBody)) || m.Subject.MediaType != ocispec.MediaTypeImageManifest {
			t.Fatalf("referrer %d: subject %+v, want %+v", i, m.Subject, subjectDesc)
		}
		if m.MediaType != ocispec.MediaTypeImageManifest || !reflect.DeepEqual(m.Config, empty) || len(m.Layers) != 1 {
			t.Fatalf("referrer %d: %s", i, body)
		}
		switch m.ArtifactType {
		case filteredArtifactType:
			filtered++
		case referrerArtifactType:
		default:
			t.Fatalf("referrer %d: artifactType %q", i, m.ArtifactType)
		}
	}
	if len(digests) != n {
		t.Errorf("%d referrers, %d distinct digests", n, len(digests))
	}
	if filtered != n/filterEvery {
		t.Errorf("%d of %d referrers have the filtered type, want %d", filtered, n, n/filterEvery)
	}
	if referrerArtifactTypeOf(0) != referrerArtifactType {
		t.Error("the only referrer of a one-referrer row has the filtered type")
	}
}

// listing is a referrers answer holding descs.
func listing(t *testing.T, descs ...ocispec.Descriptor) []byte {
	t.Helper()
	b, err := json.Marshal(ocispec.Index{MediaType: ocispec.MediaTypeImageIndex, Manifests: descs})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReferrersListing(t *testing.T) {
	a := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("a"), Size: 1, ArtifactType: referrerArtifactType}
	b := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("b"), Size: 1, ArtifactType: filteredArtifactType}
	c := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromString("c"), Size: 1, ArtifactType: referrerArtifactType}
	rs := &referrerSet{repo: "bench/referrers-3", subject: descriptor(ocispec.MediaTypeImageManifest, []byte("s")),
		artifactTypes: map[digest.Digest]string{a.Digest: a.ArtifactType, b.Digest: b.ArtifactType, c.Digest: c.ArtifactType}}
	if rs.want("") != 3 || rs.want(filteredArtifactType) != 1 || rs.want("other") != 0 {
		t.Errorf("want: %d, %d, %d", rs.want(""), rs.want(filteredArtifactType), rs.want("other"))
	}
	if got, want := rs.path(""), "/v2/bench/referrers-3/referrers/"+rs.subject.Digest.String(); got != want {
		t.Errorf("path = %q, want %q", got, want)
	}
	if got := rs.path(filteredArtifactType); !strings.HasSuffix(got, "?artifactType=application%2Fvnd.example.test.filtered") {
		t.Errorf("filtered path = %q", got)
	}

	// Two pages make one listing.
	descs, err := parseReferrers([][]byte{listing(t, a, b), listing(t, c)}, "")
	if err != nil || len(descs) != 3 {
		t.Fatalf("parseReferrers = %v, %v", descs, err)
	}
	if err := rs.checkListing(descs, ""); err != nil {
		t.Errorf("checkListing of every referrer: %v", err)
	}
	if err := rs.checkListing([]ocispec.Descriptor{b}, filteredArtifactType); err != nil {
		t.Errorf("checkListing filtered: %v", err)
	}

	for _, tc := range []struct {
		name  string
		descs []ocispec.Descriptor
		err   string
	}{
		{"missing", []ocispec.Descriptor{a, b}, "2 referrers listed, want 3"},
		{"twice", []ocispec.Descriptor{a, b, a}, "twice"},
		{"unknown", []ocispec.Descriptor{a, b, c, {Digest: digest.FromString("x")}}, "was not pushed"},
		{"wrong type", []ocispec.Descriptor{a, b, {Digest: c.Digest, ArtifactType: "x"}}, `artifactType "x"`},
	} {
		if err := rs.checkListing(tc.descs, ""); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: checkListing = %v, want %q", tc.name, err, tc.err)
		}
	}
	if _, err := parseReferrers([][]byte{listing(t, a, b)}, filteredArtifactType); err == nil {
		t.Error("a filtered listing with another type is accepted")
	}
	if _, err := parseReferrers([][]byte{[]byte(`{"schemaVersion":2,"manifests":[]}`)}, ""); err == nil {
		t.Error("an answer that is not an image index is accepted")
	}
	if _, err := parseReferrers([][]byte{[]byte(`<html>`)}, ""); err == nil {
		t.Error("garbage is accepted")
	}
}

func TestNextPage(t *testing.T) {
	for _, tc := range []struct {
		links []string
		want  string
		err   bool
	}{
		{nil, "", false},
		{[]string{`</v2/bench/r/referrers/sha256:ab?n=100&last=x>; rel="next"`}, "/v2/bench/r/referrers/sha256:ab?n=100&last=x", false},
		{[]string{`</a>; rel="prev", </b?c=1>; rel="next"`}, "/b?c=1", false},
		{[]string{`</a>; rel="prev"`}, "", false},
		{[]string{`</a>;rel="prev"`, `</b>;rel="next"`}, "/b", false},
		{[]string{`<http://elsewhere.example/v2/x>; rel="next"`}, "", true},
		{[]string{`/v2/x; rel="next"`}, "", true},
	} {
		h := http.Header{}
		for _, l := range tc.links {
			h.Add("Link", l)
		}
		got, err := nextPage(h)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("nextPage(%q) = %q, %v; want %q (error %v)", tc.links, got, err, tc.want, tc.err)
		}
	}
}

func TestTrustConfigLoads(t *testing.T) {
	file := filepath.Join(t.TempDir(), "berth.yaml")
	key := filepath.Join(t.TempDir(), "dir with space", "cosign.pub")
	if err := os.WriteFile(file, []byte(trustConfig("bench/*", key)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []config.TrustPolicy{{Repositories: []string{"bench/*"}, Keys: []string{key}}}
	if !reflect.DeepEqual(c.Trust.Policies, want) {
		t.Errorf("trust.policies = %+v, want %+v", c.Trust.Policies, want)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

func TestCosignEnv(t *testing.T) {
	got := cosignEnv([]string{"HOME=/h", "COSIGN_PASSWORD=theirs", "COSIGN_EXPERIMENTAL=1", "SIGSTORE_REKOR_URL=x", "PATH=/bin"}, "COSIGN_EXPERIMENTAL=1")
	want := []string{"HOME=/h", "PATH=/bin", "COSIGN_PASSWORD=" + cosignPassword, "COSIGN_EXPERIMENTAL=1"}
	if !slices.Equal(got, want) {
		t.Errorf("cosignEnv = %q, want %q", got, want)
	}
}

func TestSignModeNames(t *testing.T) {
	m := signMode{label: "tag scheme", prefix: "pkg", count: 100}
	if got := m.packageName(7); got != "pkg-0007" {
		t.Errorf("packageName(7) = %q", got)
	}
	if got := m.rowName(); got != "cosign sign (tag scheme) until search verified=true, 100 signs" {
		t.Errorf("rowName = %q", got)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int]string{0: "0 B", 312: "312 B", 1024: "1.0 KiB", 24_100: "23.5 KiB", 1 << 20: "1.0 MiB", 1_300_000: "1.2 MiB"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// An ERROR row counts among the rows the summary line judges, with a target
// or without.
func TestPrintCatalogTableErrors(t *testing.T) {
	rows := []catRow{
		{name: "referrers", value: "-", result: "ERROR", detail: "GET: 404 Not Found"},
		{name: "cosign sign", value: "3.00 ms", p99: "9.00 ms", target: "p99 <= 200.00 ms", result: "met"},
	}
	var out bytes.Buffer
	printCatalogTable(&out, "provenance: test", rows)
	if got := out.String(); !strings.HasSuffix(got, "1 of 2 rows with a target MISS (or are INCOMPLETE/ERROR)\n") {
		t.Errorf("table:\n%s", got)
	}
}
