package signing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/signing"
	"github.com/berth-registry/berth/signing/signingtest"
	"github.com/berth-registry/berth/storage"
)

// testRegistry is berth's registry on loopback, with a Fetcher reading it in process.
type testRegistry struct {
	host    string
	fetcher signing.Fetcher
}

func newTestRegistry(t *testing.T) *testRegistry {
	t.Helper()
	reg, err := registry.New(context.Background(), registry.Options{
		Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "test",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(reg)
	t.Cleanup(srv.Close)
	return &testRegistry{
		host:    strings.TrimPrefix(srv.URL, "http://"),
		fetcher: catalog.SignatureFetcher(catalog.NewDistributionSource(reg.Namespace(), reg.Referrers, reg.UntagDangling)),
	}
}

// pushManifest stores a small image manifest in repo and returns its digest.
func (r *testRegistry) pushManifest(t *testing.T, repo, annotation string) digest.Digest {
	t.Helper()
	config := []byte("{}")
	cd := digest.FromBytes(config)
	loc := r.do(t, http.MethodPost, "/v2/"+repo+"/blobs/uploads/", "", nil, http.StatusAccepted).Get("Location")
	sep := "?"
	if strings.Contains(loc, "?") {
		sep = "&"
	}
	r.do(t, http.MethodPut, strings.TrimPrefix(loc, "http://"+r.host)+sep+"digest="+cd.String(), "application/octet-stream", config, http.StatusCreated)
	m := ocispec.Manifest{
		MediaType:   ocispec.MediaTypeImageManifest,
		Config:      ocispec.Descriptor{MediaType: ocispec.MediaTypeEmptyJSON, Digest: cd, Size: int64(len(config))},
		Layers:      []ocispec.Descriptor{{MediaType: ocispec.MediaTypeEmptyJSON, Digest: cd, Size: int64(len(config))}},
		Annotations: map[string]string{"test": annotation},
	}
	m.SchemaVersion = 2
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d := digest.FromBytes(b)
	r.do(t, http.MethodPut, "/v2/"+repo+"/manifests/"+d.String(), ocispec.MediaTypeImageManifest, b, http.StatusCreated)
	return d
}

func (r *testRegistry) do(t *testing.T, method, path, contentType string, body []byte, want int) http.Header {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+r.host+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, msg, want)
	}
	return resp.Header
}

// TestSignWithTransparencyLog: a signature recorded in a transparency log
// carries the log's entry, which a rule trusting that log checks; a rule
// that requires a log refuses a signature made offline, or logged elsewhere.
func TestSignWithTransparencyLog(t *testing.T) {
	ctx := context.Background()
	r := newTestRegistry(t)
	kp := signingtest.NewKeyPair(t, "")
	log, elsewhere := signingtest.NewLog(t), signingtest.NewLog(t)
	trusted, err := signing.LoadLogKeys(log.PublicKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	other, err := signing.LoadLogKeys(elsewhere.PublicKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	const repo = "stable/demo"
	logged, offline, both := r.pushManifest(t, repo, "logged"), r.pushManifest(t, repo, "offline"), r.pushManifest(t, repo, "both")
	for _, s := range []struct {
		d    digest.Digest
		opts signing.SignOptions
	}{
		{logged, signing.SignOptions{TLog: log.URL}},
		{offline, signing.SignOptions{}},
		{both, signing.SignOptions{}},
		{both, signing.SignOptions{TLog: log.URL, Referrer: true}},
	} {
		if err := signing.Sign(ctx, kp.Signer, r.host+"/"+repo+"@"+s.d.String(), s.opts); err != nil {
			t.Fatalf("sign %s %+v: %v", s.d, s.opts, err)
		}
	}

	rule := func(l *signing.LogKeys) *signing.Policy {
		return signing.NewPolicyOf(signing.Rule{Repositories: []string{"stable/*"}, Keys: []signing.Key{kp.Key}, Log: l})
	}
	for _, tc := range []struct {
		name     string
		d        digest.Digest
		policy   *signing.Policy
		verified bool
		reason   string
	}{
		{"logged, log trusted", logged, rule(trusted), true, ""},
		{"logged, no log required", logged, rule(nil), true, ""},
		{"offline, no log required", offline, rule(nil), true, ""},
		{"offline, log required", offline, rule(trusted), false, "no transparency log entry: the trust policy requires one"},
		{"logged in another log", logged, rule(other), false, "is from log "},
		{"offline tag signature beside a logged referrer", both, rule(trusted), true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := signing.Check(ctx, r.fetcher, tc.policy, repo, tc.d.String())
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verified() != tc.verified || !strings.Contains(rep.Reason(), tc.reason) {
				t.Fatalf("verified %v, reason %q; want %v, %q", rep.Verified(), rep.Reason(), tc.verified, tc.reason)
			}
		})
	}
}

func TestLoadOrCreateSigner(t *testing.T) {
	file := filepath.Join(t.TempDir(), "keys", "provenance.key")
	s, err := signing.LoadOrCreateSigner(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := signing.LoadPublicKey(signing.PublicKeyFile(file))
	if err != nil {
		t.Fatal(err)
	}
	if pub.ID != s.KeyID {
		t.Errorf("public key %s, private key %s", pub.ID, s.KeyID)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode: %v %v", fi, err)
	}
	again, err := signing.LoadOrCreateSigner(file, nil)
	if err != nil || again.KeyID != s.KeyID {
		t.Errorf("loaded again: %v, key %s, want %s", err, again.KeyID, s.KeyID)
	}
	if _, err := signing.LoadOrCreateSigner(file, []byte("wrong")); err == nil || !strings.Contains(err.Error(), "wrong password") {
		t.Errorf("wrong password: %v", err)
	}
}
