package main

// The provenance benchmarks (go run ./test/bench -provenance, make
// bench-provenance): one berth serve with a trust policy, timed on the OCI
// referrers API and from the real cosign CLI signing a package to the search
// listing it as verified. See docs/benchmarks.md for what each row measures.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sync/errgroup"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
)

// verifiedTarget bounds the p99 of the time from cosign sign exiting to the
// search listing the signed package as verified.
const verifiedTarget = 200 * time.Millisecond

const (
	// provenanceNamespace holds everything the provenance benchmarks push;
	// the trust policy covers it.
	provenanceNamespace = "bench"
	// referrerArtifactType is the artifactType of the pushed referrers but
	// one in filterEvery, which have filteredArtifactType.
	referrerArtifactType = "application/vnd.example.test"
	filteredArtifactType = "application/vnd.example.test.filtered"
	filterEvery          = 100
	// indexAnnotation numbers the pushed referrers, so that each is distinct.
	indexAnnotation = "com.example.bench.index"
	// maxListedDescriptors bounds the descriptors one referrers row reads:
	// lists too big for -provenance-requests listings get fewer.
	maxListedDescriptors = 1_000_000
	// referrerWarmup is how many untimed listings precede a row's timed ones.
	referrerWarmup = 20
	// cosignPassword encrypts the generated cosign key.
	cosignPassword = "berth-bench"
	// signProgressEvery is how often the signing rows report progress.
	signProgressEvery = 10
)

// provenanceOptions are the flags of the provenance benchmarks.
type provenanceOptions struct {
	enabled         bool
	referrers       string // referrer counts, comma-separated
	requests        int
	pushConcurrency int
	signs           int
	referrerSigns   int
	timeout         time.Duration
	keep            bool

	counts []int // referrers parsed, ascending; set by validate
}

// registerProvenanceFlags declares the flags of the provenance benchmarks.
func registerProvenanceFlags(o *provenanceOptions) {
	flag.BoolVar(&o.enabled, "provenance", false, "run the provenance benchmarks (referrers API, cosign sign to verified in search) instead of the registry comparison")
	flag.StringVar(&o.referrers, "provenance-referrers", "1,100,5000", "provenance: referrers of one subject in each referrers row, comma-separated (\"none\": no referrers rows); the largest also gets an artifactType row")
	flag.IntVar(&o.requests, "provenance-requests", 500, "provenance: timed listings per referrers row; fewer when the list is long, so that a row reads at most 1,000,000 descriptors")
	flag.IntVar(&o.pushConcurrency, "provenance-push-concurrency", 4, "provenance: referrer manifests pushed at a time")
	flag.IntVar(&o.signs, "provenance-signs", 100, "provenance: packages signed with cosign's tag scheme, each timed until the search lists it verified (0: no row)")
	flag.IntVar(&o.referrerSigns, "provenance-referrer-signs", 100, "provenance: packages signed with cosign --registry-referrers-mode=oci-1-1, timed the same way (0: no row)")
	flag.DurationVar(&o.timeout, "provenance-timeout", 30*time.Second, "provenance: how long a pushed package may take to be found, and a signed one to be found verified, before its row fails")
	flag.BoolVar(&o.keep, "provenance-keep", false, "provenance: keep the temporary directory (data, keys, configuration, server log) and print its path")
}

func (o *provenanceOptions) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"provenance-requests", o.requests}, {"provenance-push-concurrency", o.pushConcurrency}} {
		if f.value < 1 {
			return fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.signs < 0 || o.referrerSigns < 0 {
		return errors.New("-provenance-signs and -provenance-referrer-signs must not be negative")
	}
	if o.timeout <= 0 {
		return errors.New("-provenance-timeout must be positive")
	}
	counts, err := parseCounts(o.referrers)
	if err != nil {
		return fmt.Errorf("-provenance-referrers: %w", err)
	}
	if len(counts) == 0 && o.signs == 0 && o.referrerSigns == 0 {
		return errors.New("nothing to run: no -provenance-referrers and no signs")
	}
	o.counts = counts
	return nil
}

// parseCounts reads a comma-separated list of positive counts, each given
// once, and returns them in ascending order; "" and "none" are no counts.
func parseCounts(s string) ([]int, error) {
	if s = strings.TrimSpace(s); s == "" || s == "none" {
		return nil, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive count", strings.TrimSpace(f))
		}
		if slices.Contains(out, n) {
			return nil, fmt.Errorf("%d given twice", n)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// listingRequests is how many timed listings of n referrers a row makes:
// requests, or fewer so that the row reads at most maxListedDescriptors.
func listingRequests(n, requests int) int {
	return min(requests, max(1, maxListedDescriptors/n))
}

// runProvenance runs the provenance benchmarks and prints their table. A
// row that fails becomes an ERROR row and the others still run; the run then
// ends in an error, after the table.
func runProvenance(ctx context.Context, o provenanceOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	began := time.Now()
	modRoot, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	logf("building berth and cosign")
	ws, cleanup, err := newWorkspace(ctx, modRoot, "berth-bench-provenance-", o.keep, "keys")
	if err != nil {
		return err
	}
	defer cleanup()
	serverDir, keysDir, bin, goVersion := ws.serverDir, filepath.Join(ws.root, "keys"), ws.bin, ws.goVersion
	cos, err := newCosign(ctx, modRoot, keysDir)
	if err != nil {
		return err
	}
	configFile := filepath.Join(serverDir, "berth.yaml")
	if err := os.WriteFile(configFile, []byte(trustConfig(provenanceNamespace+"/*", cos.pub)), 0o644); err != nil {
		return err
	}
	srv, _, err := startCatalogServer(ctx, bin, serverDir, filepath.Join(serverDir, "data"), "--config", configFile)
	if err != nil {
		return err
	}
	defer func() {
		srv.mem.close()
		stop(srv.server)
	}()
	logf("berth on %s, trusting %s for %s/*; cosign %s", srv.addr, cos.pub, provenanceNamespace, cos.version)
	search := newSearcher(srv.addr)

	var rows []catRow
	failed := 0
	// record adds the rows of a step; a failed step adds an ERROR row and the
	// run goes on, unless it was interrupted or the server is gone.
	record := func(name, target string, got []catRow, err error) error {
		rows = append(rows, got...)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		select {
		case <-srv.exited:
			return fmt.Errorf("%s: %w", name, err)
		default:
		}
		logf("%s: %v", name, err)
		failed++
		msg, _, _ := strings.Cut(err.Error(), "\n")
		rows = append(rows, catRow{name: name, value: "-", target: target, result: "ERROR", detail: msg})
		return nil
	}

	if len(o.counts) > 0 {
		got, err := measureReferrers(ctx, newTarget("berth", srv.addr), search, o)
		if err := record("referrers", "", got, err); err != nil {
			return err
		}
	}
	cl, err := pushClient(srv.addr)
	if err != nil {
		return err
	}
	for _, m := range []signMode{
		{label: "tag scheme", prefix: "pkg", count: o.signs},
		{label: "--registry-referrers-mode=oci-1-1", prefix: "pkg-oci", count: o.referrerSigns, referrers: true},
	} {
		if m.count == 0 {
			continue
		}
		row, err := measureSigning(ctx, srv, search, cl, cos, m, o)
		var got []catRow
		if err == nil {
			got = []catRow{row}
		}
		if err := record(m.rowName(), "p99 <= "+formatDuration(verifiedTarget), got, err); err != nil {
			return err
		}
	}
	rows = append(rows, rssRow("RSS at the end", srv))

	header := fmt.Sprintf("provenance: berth serve trusting one cosign key for %s/*; cosign %s; machine: %d cores, %s/%s, %s",
		provenanceNamespace, cos.version, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, goVersion)
	printCatalogTable(os.Stdout, header, rows)
	logf("done in %s", time.Since(began).Round(time.Second))
	if failed > 0 {
		hint := "run with -provenance-keep to keep the server log"
		if o.keep {
			hint = "see " + filepath.Join(serverDir, "server.log")
		}
		return fmt.Errorf("%d of the steps failed (ERROR rows); %s", failed, hint)
	}
	return nil
}

// trustConfig is a berth serve configuration whose trust policy trusts the
// public key in file keyFile for the repositories glob matches.
func trustConfig(glob, keyFile string) string {
	return fmt.Sprintf("trust:\n  policies:\n    - repositories: [%q]\n      keys: [%q]\n", glob, keyFile)
}

// The referrers API.

// emptyJSON is the content of the OCI empty descriptor: the config and the
// one layer of every manifest the referrers rows push.
var emptyJSON = []byte("{}")

func emptyDescriptor() ocispec.Descriptor { return descriptor(ocispec.MediaTypeEmptyJSON, emptyJSON) }

// subjectManifest is the image manifest the referrers of the row for n
// referrers refer to.
func subjectManifest(n int) ([]byte, error) {
	return json.Marshal(ocispec.Manifest{
		Versioned:   specs.Versioned{SchemaVersion: 2},
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      emptyDescriptor(),
		Layers:      []ocispec.Descriptor{emptyDescriptor()},
		Annotations: map[string]string{indexAnnotation: "subject of " + strconv.Itoa(n)},
	})
}

// referrerArtifactTypeOf is the artifactType of referrer i: one in
// filterEvery has filteredArtifactType, so that n referrers hold
// n/filterEvery of them.
func referrerArtifactTypeOf(i int) string {
	if i%filterEvery == filterEvery-1 {
		return filteredArtifactType
	}
	return referrerArtifactType
}

// referrerManifest is referrer i of subject: an artifact manifest with the
// empty config and layer, told apart from the others by its annotation.
func referrerManifest(subject ocispec.Descriptor, i int) ([]byte, error) {
	return json.Marshal(ocispec.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    ocispec.MediaTypeImageManifest,
		ArtifactType: referrerArtifactTypeOf(i),
		Config:       emptyDescriptor(),
		Layers:       []ocispec.Descriptor{emptyDescriptor()},
		Subject:      &subject,
		Annotations:  map[string]string{indexAnnotation: strconv.Itoa(i)},
	})
}

// referrerSet is a subject and the referrers pushed for it.
type referrerSet struct {
	repo    string
	subject ocispec.Descriptor
	// artifactTypes are the pushed referrers' artifact types by digest.
	artifactTypes map[digest.Digest]string
	pushed        time.Duration // pushing the referrers, not the subject
	// withSubject counts the PUTs answered with OCI-Subject: the registry
	// said it lists the referrer under its subject.
	withSubject int
}

// want is how many referrers a listing filtered by artifactType ("" for
// none) must show.
func (rs *referrerSet) want(artifactType string) int {
	n := 0
	for _, at := range rs.artifactTypes {
		if artifactType == "" || at == artifactType {
			n++
		}
	}
	return n
}

// pushReferrers pushes the empty blob, a subject manifest and n referrers of
// it into repo, each manifest by digest with one PUT, concurrency at a time.
func pushReferrers(ctx context.Context, t *target, repo string, n, concurrency int) (*referrerSet, error) {
	empty := emptyDescriptor()
	blobs := t.repository(repo).Blobs()
	if exists, err := blobs.Exists(ctx, empty); err != nil {
		return nil, fmt.Errorf("%s: stat the empty blob: %w", repo, err)
	} else if !exists {
		if err := blobs.Push(ctx, empty, bytes.NewReader(emptyJSON)); err != nil {
			return nil, fmt.Errorf("%s: push the empty blob: %w", repo, err)
		}
	}
	body, err := subjectManifest(n)
	if err != nil {
		return nil, err
	}
	rs := &referrerSet{repo: repo, subject: descriptor(ocispec.MediaTypeImageManifest, body), artifactTypes: make(map[digest.Digest]string, n)}
	if _, err := putManifest(ctx, t, repo, body); err != nil {
		return nil, err
	}
	manifests := make([][]byte, n)
	for i := range manifests {
		if manifests[i], err = referrerManifest(rs.subject, i); err != nil {
			return nil, err
		}
		rs.artifactTypes[digest.FromBytes(manifests[i])] = referrerArtifactTypeOf(i)
	}
	var withSubject atomic.Int64
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, m := range manifests {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error {
			subject, err := putManifest(gctx, t, repo, m)
			if subject == rs.subject.Digest.String() {
				withSubject.Add(1)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	rs.pushed = time.Since(start)
	rs.withSubject = int(withSubject.Load())
	return rs, nil
}

// putManifest sends PUT /v2/<repo>/manifests/<digest> with an image manifest
// and returns the answer's OCI-Subject header. Only a 201 with the digest
// sent is a success.
func putManifest(ctx context.Context, t *target, repo string, body []byte) (string, error) {
	d := digest.FromBytes(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, fmt.Sprintf("http://%s/v2/%s/manifests/%s", t.addr, repo, d), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", ocispec.MediaTypeImageManifest)
	resp, err := t.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("PUT %s@%s: %w", repo, d, err)
	}
	defer resp.Body.Close()
	var answer bytes.Buffer
	_, _ = answer.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("PUT %s@%s: %s: %s", repo, d, resp.Status, bytes.TrimSpace(answer.Bytes()))
	}
	if got := resp.Header.Get("Docker-Content-Digest"); got != "" && got != d.String() {
		return "", fmt.Errorf("PUT %s@%s: stored as %s", repo, d, got)
	}
	return resp.Header.Get("OCI-Subject"), nil
}

// referrersPath is the path of the referrers listing of rs's subject,
// filtered by artifactType unless it is "".
func (rs *referrerSet) path(artifactType string) string {
	p := fmt.Sprintf("/v2/%s/referrers/%s", rs.repo, rs.subject.Digest)
	if artifactType != "" {
		p += "?" + url.Values{"artifactType": {artifactType}}.Encode()
	}
	return p
}

// listReferrers sends GET path, and GET of every next page the answers'
// Link headers name, and returns the bodies and the time from sending the
// first request to having read the last body.
func listReferrers(ctx context.Context, s *searcher, path string) ([][]byte, time.Duration, error) {
	var pages [][]byte
	start := time.Now()
	for path != "" {
		body, h, err := s.getWithHeader(ctx, path)
		if err != nil {
			return nil, 0, err
		}
		pages = append(pages, body)
		if path, err = nextPage(h); err != nil {
			return nil, 0, err
		}
	}
	return pages, time.Since(start), nil
}

// nextPage is the request path of the page a Link header with rel="next"
// names (OCI distribution spec pagination), "" when there is none. A link
// to another host is an error: the harness talks only to its server.
func nextPage(h http.Header) (string, error) {
	for _, v := range h.Values("Link") {
		for link := range strings.SplitSeq(v, ",") {
			target, params, ok := strings.Cut(link, ";")
			if !ok || !strings.Contains(strings.ReplaceAll(params, " ", ""), `rel="next"`) {
				continue
			}
			target = strings.TrimSpace(target)
			if !strings.HasPrefix(target, "<") || !strings.HasSuffix(target, ">") {
				return "", fmt.Errorf("malformed Link %q", v)
			}
			u, err := url.Parse(target[1 : len(target)-1])
			if err != nil {
				return "", fmt.Errorf("Link %q: %w", v, err)
			}
			if u.Host != "" {
				return "", fmt.Errorf("Link %q leads to another host", v)
			}
			return u.RequestURI(), nil
		}
	}
	return "", nil
}

// parseReferrers reads the pages of a referrers listing: image indexes
// whose descriptors, when artifactType is not "", all have that type.
func parseReferrers(pages [][]byte, artifactType string) ([]ocispec.Descriptor, error) {
	var out []ocispec.Descriptor
	for _, page := range pages {
		var idx ocispec.Index
		if err := json.Unmarshal(page, &idx); err != nil {
			return nil, fmt.Errorf("referrers: %w", err)
		}
		if idx.MediaType != ocispec.MediaTypeImageIndex {
			return nil, fmt.Errorf("referrers: mediaType %q, want %q", idx.MediaType, ocispec.MediaTypeImageIndex)
		}
		for _, d := range idx.Manifests {
			if artifactType != "" && d.ArtifactType != artifactType {
				return nil, fmt.Errorf("referrers filtered by %s list %s of type %q", artifactType, d.Digest, d.ArtifactType)
			}
		}
		out = append(out, idx.Manifests...)
	}
	return out, nil
}

// checkListing fails unless descs are exactly the referrers of rs of
// artifactType ("" for all), each once.
func (rs *referrerSet) checkListing(descs []ocispec.Descriptor, artifactType string) error {
	seen := make(map[digest.Digest]bool, len(descs))
	for _, d := range descs {
		at, ok := rs.artifactTypes[d.Digest]
		switch {
		case !ok:
			return fmt.Errorf("%s: referrers list %s, which was not pushed", rs.repo, d.Digest)
		case seen[d.Digest]:
			return fmt.Errorf("%s: referrers list %s twice", rs.repo, d.Digest)
		case d.ArtifactType != at:
			return fmt.Errorf("%s: referrer %s listed with artifactType %q, pushed with %q", rs.repo, d.Digest, d.ArtifactType, at)
		}
		seen[d.Digest] = true
	}
	if want := rs.want(artifactType); len(descs) != want {
		return fmt.Errorf("%s: %d referrers listed, want %d", rs.repo, len(descs), want)
	}
	return nil
}

// measureReferrers pushes, for each count, a subject with that many
// referrers into its own repository and times listing them; the largest
// count also gets a listing filtered by artifactType.
func measureReferrers(ctx context.Context, t *target, s *searcher, o provenanceOptions) ([]catRow, error) {
	var rows []catRow
	for i, n := range o.counts {
		repo := fmt.Sprintf("%s/referrers-%d", provenanceNamespace, n)
		logf("pushing a subject and %s referrers into %s, %d at a time", thousands(n), repo, o.pushConcurrency)
		rs, err := pushReferrers(ctx, t, repo, n, o.pushConcurrency)
		if err != nil {
			return rows, err
		}
		filters := []string{""}
		if i == len(o.counts)-1 && rs.want(filteredArtifactType) > 0 {
			filters = append(filters, filteredArtifactType)
		}
		for _, at := range filters {
			row, err := timeListing(ctx, s, rs, at, o)
			if err != nil {
				return rows, err
			}
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// timeListing checks the listing of rs's referrers of artifactType ("" for
// all) in full, lists them referrerWarmup times untimed, then times
// listingRequests listings, one at a time, counting the referrers of each.
func timeListing(ctx context.Context, s *searcher, rs *referrerSet, artifactType string, o provenanceOptions) (catRow, error) {
	path := rs.path(artifactType)
	want := rs.want(artifactType)
	pages, _, err := listReferrers(ctx, s, path)
	if err != nil {
		return catRow{}, err
	}
	descs, err := parseReferrers(pages, artifactType)
	if err != nil {
		return catRow{}, err
	}
	if err := rs.checkListing(descs, artifactType); err != nil {
		return catRow{}, err
	}
	size := 0
	for _, p := range pages {
		size += len(p)
	}
	for range referrerWarmup {
		if _, _, err := listReferrers(ctx, s, path); err != nil {
			return catRow{}, err
		}
	}
	requests := listingRequests(max(want, 1), o.requests)
	settle()
	lat := make([]time.Duration, requests)
	for i := range lat {
		pages, took, err := listReferrers(ctx, s, path)
		if err != nil {
			return catRow{}, err
		}
		descs, err := parseReferrers(pages, artifactType)
		if err != nil {
			return catRow{}, err
		}
		if len(descs) != want {
			return catRow{}, fmt.Errorf("%s: listing %d of %d: %d referrers, want %d", rs.repo, i+1, requests, len(descs), want)
		}
		lat[i] = took
	}
	total := len(rs.artifactTypes)
	name := fmt.Sprintf("referrers: GET /v2/<repo>/referrers/<digest>, %s referrer%s, c=1", thousands(total), plural(total))
	if artifactType != "" {
		name = fmt.Sprintf("referrers: %s referrers, ?artifactType= matching %s, c=1", thousands(total), thousands(want))
	}
	p50, p99 := percentile(lat, 0.50), percentile(lat, 0.99)
	logf("%s: p50 %s, p99 %s", name, formatDuration(p50), formatDuration(p99))
	detail := fmt.Sprintf("%s requests; %s manifest%s listed, %s answer", thousands(requests), thousands(want), plural(want), formatBytes(size))
	if len(pages) > 1 {
		detail += fmt.Sprintf(" in %d pages", len(pages))
	}
	if artifactType == "" {
		detail += fmt.Sprintf("; pushed by digest in %s at c=%d, OCI-Subject on %s of %s PUTs",
			formatDuration(rs.pushed), o.pushConcurrency, thousands(rs.withSubject), thousands(total))
	}
	return catRow{name: name, value: formatDuration(p50), p99: formatDuration(p99), detail: detail}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// formatBytes prints a size in B, KiB or MiB.
func formatBytes(n int) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// cosign.

// cosignCLI is the real cosign binary, pinned in go.mod, and a key pair it
// generated.
type cosignCLI struct {
	bin, key, pub, version string
}

// newCosign finds the pinned cosign (go tool -n cosign, which builds it
// once) and has it generate a key pair in dir.
func newCosign(ctx context.Context, modRoot, dir string) (*cosignCLI, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "-n", "cosign")
	cmd.Dir = modRoot
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go tool -n cosign: %w", err)
	}
	c := &cosignCLI{bin: strings.TrimSpace(string(out)), key: filepath.Join(dir, "cosign.key"), pub: filepath.Join(dir, "cosign.pub")}
	if _, err := c.run(ctx, dir, nil, "generate-key-pair"); err != nil {
		return nil, err
	}
	version, err := c.run(ctx, dir, nil, "version", "--json")
	if err != nil {
		return nil, err
	}
	var v struct{ GitVersion string }
	if err := json.Unmarshal(version, &v); err != nil || v.GitVersion == "" {
		c.version = "(unknown version)"
	} else {
		c.version = v.GitVersion
	}
	return c, nil
}

// run runs cosign in dir with cosignEnv(extraEnv) and returns its standard
// output; a failure carries its standard error.
func (c *cosignCLI) run(ctx context.Context, dir string, extraEnv []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = cosignEnv(os.Environ(), extraEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("cosign %s: %w\n%s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

// sign runs cosign sign with the key, without the transparency log, on ref
// (host/repo@digest); with referrers, as an OCI 1.1 referrer. It returns
// how long cosign ran and the moment it had exited.
func (c *cosignCLI) sign(ctx context.Context, ref string, referrers bool) (time.Duration, time.Time, error) {
	args := []string{"sign", "--key", c.key, "--tlog-upload=false", "--yes"}
	var env []string
	if referrers {
		args = append(args, "--registry-referrers-mode=oci-1-1")
		env = []string{"COSIGN_EXPERIMENTAL=1"}
	}
	start := time.Now()
	_, err := c.run(ctx, filepath.Dir(c.key), env, append(args, ref)...)
	exited := time.Now()
	return exited.Sub(start), exited, err
}

// cosignEnv is environ without cosign's and sigstore's settings, with the
// key's password, and extra.
func cosignEnv(environ []string, extra ...string) []string {
	env := make([]string, 0, len(environ)+1+len(extra))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "COSIGN_") && !strings.HasPrefix(kv, "SIGSTORE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "COSIGN_PASSWORD="+cosignPassword)
	return append(env, extra...)
}

// Signed to verified.

// signMode is one signing row: how cosign stores its signatures, and the
// packages it signs, prefix-0001 ... in provenanceNamespace.
type signMode struct {
	label     string
	prefix    string
	count     int
	referrers bool // --registry-referrers-mode=oci-1-1
}

func (m signMode) rowName() string {
	return fmt.Sprintf("cosign sign (%s) until search verified=true, %s signs", m.label, thousands(m.count))
}

// packageName is the name of package i of m; 0 is the untimed warm-up.
func (m signMode) packageName(i int) string { return fmt.Sprintf("%s-%04d", m.prefix, i) }

// findPackage is the summary of namespace/name at version in res, or nil.
func findPackage(res *apiv1.SearchResponse, namespace, name, version string) *apiv1.PackageSummary {
	for i := range res.Packages {
		if p := &res.Packages[i]; p.Namespace == namespace && p.Name == name && p.Version == version {
			return p
		}
	}
	return nil
}

// measureSigning pushes m.count packages and one warm-up, one at a time, with
// berth's client; waits until the search finds each (unverified); signs it
// with cosign; and times from cosign exiting to the search for its name with
// verified=true listing it, polled every millisecond.
func measureSigning(ctx context.Context, srv *catServer, s *searcher, cl *client.Client, cos *cosignCLI, m signMode, o provenanceOptions) (catRow, error) {
	specs := freshPackages(1, m.count+1, provenanceNamespace)
	latencies := make([]time.Duration, 0, m.count)
	cosignTimes := make([]time.Duration, 0, m.count)
	atOnce := 0 // signs the first search after cosign exited found verified
	logf("%s: pushing %d packages one at a time, each signed once the search finds it", m.label, m.count)
	settle()
	for i := range specs {
		p := &specs[i]
		p.name = m.packageName(i)
		pkgs, err := p.build()
		if err != nil {
			return catRow{}, err
		}
		art, err := pkgs[0].Artifact()
		if err != nil {
			return catRow{}, err
		}
		version := pkgformat.Tag(pkgs[0].Metadata.Version)
		repo := p.namespace + "/" + p.name
		desc, err := cl.Push(ctx, client.Reference{Registry: srv.addr, Namespace: p.namespace, Name: p.name, Tag: version}, art)
		if err != nil {
			return catRow{}, err
		}
		query := url.Values{"q": {p.name}, "namespace": {p.namespace}, "limit": {"5"}}
		if _, err := pollUntil(ctx, srv.server, o.timeout, time.Millisecond, func() (bool, error) {
			res, _, err := s.query(ctx, "/api/v1/packages?"+query.Encode())
			if err != nil {
				return false, err
			}
			found := findPackage(res, p.namespace, p.name, version)
			if found != nil && found.Verified {
				return false, fmt.Errorf("%s:%s is verified before it was signed", repo, version)
			}
			return found != nil, nil
		}); err != nil {
			return catRow{}, fmt.Errorf("search for %s:%s after the push: %w", repo, version, err)
		}

		took, exited, err := cos.sign(ctx, fmt.Sprintf("%s/%s@%s", srv.addr, repo, desc.Digest), m.referrers)
		if err != nil {
			return catRow{}, err
		}
		query.Set("verified", "true")
		searches := 0
		verified, err := pollUntil(ctx, srv.server, o.timeout, time.Millisecond, func() (bool, error) {
			searches++
			res, _, err := s.query(ctx, "/api/v1/packages?"+query.Encode())
			if err != nil {
				return false, err
			}
			found := findPackage(res, p.namespace, p.name, version)
			return found != nil && found.Verified, nil
		})
		if err != nil {
			return catRow{}, fmt.Errorf("search verified=true for %s@%s after cosign sign: %w", repo, desc.Digest, err)
		}
		if i == 0 {
			continue // the warm-up
		}
		latencies = append(latencies, verified.Sub(exited))
		cosignTimes = append(cosignTimes, took)
		if searches == 1 {
			atOnce++
		}
		if i%signProgressEvery == 0 || i == m.count {
			logf("%s: %d/%d signed and verified; last %s after cosign exited", m.label, i, m.count, formatDuration(latencies[len(latencies)-1]))
		}
	}
	p50, p99 := percentile(latencies, 0.50), percentile(latencies, 0.99)
	return catRow{
		name:   m.rowName(),
		value:  formatDuration(p50),
		p99:    formatDuration(p99),
		target: "p99 <= " + formatDuration(verifiedTarget),
		result: verdict(p99 <= verifiedTarget),
		detail: fmt.Sprintf("from cosign exiting to GET /api/v1/packages?q=<name>&verified=true listing it (polled every 1 ms); max %s; %s of %s found by the first search; cosign sign itself: median %s, max %s",
			formatDuration(slices.Max(latencies)), thousands(atOnce), thousands(m.count),
			formatDuration(percentile(cosignTimes, 0.50)), formatDuration(slices.Max(cosignTimes))),
	}, nil
}
