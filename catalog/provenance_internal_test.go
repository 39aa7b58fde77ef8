package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/signing"
)

func TestSignatureSubject(t *testing.T) {
	hex := "90631a7270241d924d53c026e26f20261a38c5482f218dc18a5665f52a967acb"
	for _, tc := range []struct {
		tag, subject string
	}{
		{"sha256-" + hex + ".sig", "sha256:" + hex},
		{"sha256-" + hex + ".att", "sha256:" + hex},
		{"sha256-" + hex, "sha256:" + hex}, // the referrers tag schema
		{"sha256-" + hex + ".sbom", ""},
		{"sha256-" + hex[:63] + ".sig", ""},
		{"sha256-" + hex + "0.sig", ""},
		{"md5-" + hex + ".sig", ""},
		{"1.0.0", ""},
		{".sig", ""},
	} {
		got, ok := signatureSubject(tc.tag)
		if got != tc.subject || ok != (tc.subject != "") {
			t.Errorf("signatureSubject(%q) = %q, %v; want %q", tc.tag, got, ok, tc.subject)
		}
	}
}

// checkStore is the part of a Store a check uses; the rest is not called.
type checkStore struct {
	Store
	mu      sync.Mutex
	checked map[string]*SignatureCheck
}

// Stale finds no version to index again.
func (s *checkStore) Stale(context.Context, int, TagDigest, int) ([]TagDigest, error) {
	return nil, nil
}

func (s *checkStore) SignatureChecks(_ context.Context, ns, name, dgst string) ([]SignatureCheck, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// One version, a/p at sha256:1…, checked under the current policy.
	d := "sha256:" + fmt.Sprintf("%064d", 1)
	if (ns != "" && ns != "a") || (name != "" && name != "p") || (dgst != "" && dgst != d) {
		return nil, nil
	}
	return []SignatureCheck{{Namespace: "a", Name: "p", Digest: d, Checked: time.Unix(1, 0), Policy: (*signing.Policy)(nil).Fingerprint()}}, nil
}

func (s *checkStore) SignatureCheckPage(ctx context.Context, after SignatureCheck, _ int, stale string) ([]SignatureCheck, error) {
	all, err := s.SignatureChecks(ctx, "", "", "")
	if after.Digest != "" || err != nil {
		return nil, err
	}
	var page []SignatureCheck
	for _, c := range all {
		if stale == "" || c.Checked.IsZero() || c.Policy != stale {
			page = append(page, c)
		}
	}
	return page, nil
}

func (s *checkStore) PutSignatures(_ context.Context, c *SignatureCheck) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checked[c.Digest] = c
	return false, nil
}

func (s *checkStore) Tags(context.Context) ([]TagDigest, error) { return nil, nil }

func (s *checkStore) Delete(context.Context, string, string, string) (bool, error) { return false, nil }

func (s *checkStore) get(d string) *SignatureCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.checked[d]
}

// emptySource is a registry with nothing in it.
type emptySource struct{}

func (emptySource) Repositories(context.Context) ([]string, error)          { return nil, nil }
func (emptySource) Tags(context.Context, string) ([]TagRef, error)          { return nil, nil }
func (emptySource) Resolve(context.Context, string, string) (string, error) { return "", ErrNotFound }
func (emptySource) Manifest(context.Context, string, string) (string, []byte, error) {
	return "", nil, ErrNotFound
}
func (emptySource) Blob(context.Context, string, string) (io.ReadCloser, error) {
	return nil, ErrNotFound
}
func (emptySource) Referrers(context.Context, string, string) ([]ocispec.Descriptor, error) {
	return nil, nil
}
func (emptySource) DeleteRepository(context.Context, string) error { return ErrNotFound }

// TestDeferredChecks: a check a full queue cannot take is not lost: the
// pass that follows makes it, although the digest was checked under the
// current policy already.
func TestDeferredChecks(t *testing.T) {
	store := &checkStore{checked: map[string]*SignatureCheck{}}
	c, err := New(Options{Store: store, Source: emptySource{}, Workers: 1, ReconcileInterval: -1,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	c.queues[0] = make(chan task, 1)
	c.queues[0] <- task{repo: "x/y", tag: "filler"} // the queue is full
	d := "sha256:" + fmt.Sprintf("%064d", 1)
	c.enqueueCheck("a/p", d)
	if !c.hasDeferred() {
		t.Fatal("a check a full queue refused was not deferred")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(10 * time.Second)
	for store.get(d) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the deferred check was never made")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := store.get(d); got.Error != "" || len(got.Signatures) != 0 || got.Verified() {
		t.Errorf("check = %+v, want no signature", got)
	}
	if c.hasDeferred() {
		t.Error("the deferred check is still waiting")
	}
}

func TestSignatureFetcher(t *testing.T) {
	f := SignatureFetcher(emptySource{})
	ctx := context.Background()
	_, err := f.Resolve(ctx, "a/p", "sha256-x.sig")
	_, _, err2 := f.Manifest(ctx, "a/p", "sha256:1")
	_, err3 := f.Blob(ctx, "a/p", "sha256:1")
	for _, err := range []error{err, err2, err3} {
		if !errors.Is(err, signing.ErrNotFound) || !errors.Is(err, ErrNotFound) {
			t.Errorf("%v: want signing.ErrNotFound and ErrNotFound", err)
		}
	}
	unavailable := fmt.Errorf("down: %w", ErrUnavailable)
	if err := signingError(unavailable); errors.Is(err, signing.ErrNotFound) || !errors.Is(err, ErrUnavailable) {
		t.Errorf("signingError(%v) = %v", unavailable, err)
	}
	if refs, err := f.Referrers(ctx, "a/p", "sha256:1"); err != nil || len(refs) != 0 {
		t.Errorf("Referrers = %v, %v", refs, err)
	}
}
