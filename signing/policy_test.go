package signing

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/config"
)

func TestPolicy(t *testing.T) {
	dir := t.TempDir()
	_, a := keyPair(t, dir, "a")
	_, b := keyPair(t, dir, "b")
	trust := config.Trust{Policies: []config.TrustPolicy{
		{Repositories: []string{"stable/*", "release/operator"}, Keys: []string{filepath.Join(dir, "a.pub")}, Require: true},
		{Repositories: []string{"*/*"}, Keys: []string{filepath.Join(dir, "a.pub"), filepath.Join(dir, "b.pub")}},
	}}
	p, err := NewPolicy("trust", trust)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo    string
		covered bool
		require bool
		keys    []string
	}{
		{"stable/kafka", true, true, []string{a.ID}},
		{"release/operator", true, true, []string{a.ID}},
		{"release/other", true, false, []string{a.ID, b.ID}},
		{"incubator/kafka", true, false, []string{a.ID, b.ID}},
		{"stable", false, false, nil},
		{"stable/kafka/extra", false, false, nil},
	} {
		r, ok := p.For(tc.repo)
		var ids []string
		for _, k := range r.Keys {
			ids = append(ids, k.ID)
		}
		if ok != tc.covered || r.Require != tc.require || p.Requires(tc.repo) != tc.require || strings.Join(ids, ",") != strings.Join(tc.keys, ",") {
			t.Errorf("For(%q) = %v require %v keys %v; want %v %v %v", tc.repo, ok, r.Require, ids, tc.covered, tc.require, tc.keys)
		}
	}

	// Package repositories and image repositories have globs of their own:
	// neither covers the other.
	images, err := NewPolicy("trust", config.Trust{Policies: []config.TrustPolicy{
		{Repositories: []string{"*/*"}, Keys: []string{filepath.Join(dir, "a.pub")}},
		{Images: []string{"quay.io/org/*", "docker.io/library/*"}, Keys: []string{filepath.Join(dir, "b.pub")}, Require: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		repo    string
		covered bool
	}{
		{"quay.io/org/operator", true},
		{"docker.io/library/nginx", true},
		{"quay.io/other/operator", false},
		{"quay.io/org/sub/operator", false},
		{"org/operator", false},
	} {
		r, ok := images.ForImage(tc.repo)
		if ok != tc.covered || (ok && (!r.Require || r.Keys[0].ID != b.ID)) {
			t.Errorf("ForImage(%q) = %v %+v, want covered %v by b's key", tc.repo, ok, r, tc.covered)
		}
	}
	if _, ok := images.ForImage("stable/kafka"); ok {
		t.Error("an image glob matched stable/kafka, a package repository")
	}
	if r, ok := images.For("quay.io/org"); !ok || r.Keys[0].ID != a.ID {
		t.Errorf("For(quay.io/org) = %v %+v, want the package rule", ok, r)
	}

	// The fingerprint changes with a key, a glob, require or requireSource,
	// and only then.
	same, err := NewPolicy("trust", trust)
	if err != nil {
		t.Fatal(err)
	}
	if p.Fingerprint() != same.Fingerprint() {
		t.Error("the same policy has two fingerprints")
	}
	seen := map[string]string{p.Fingerprint(): "original"}
	for name, change := range map[string]func(*config.Trust){
		"key removed": func(c *config.Trust) { c.Policies[1].Keys = c.Policies[1].Keys[:1] },
		"key swapped": func(c *config.Trust) { c.Policies[0].Keys = []string{filepath.Join(dir, "b.pub")} },
		"glob added":  func(c *config.Trust) { c.Policies[0].Repositories = append(c.Policies[0].Repositories, "lts/*") },
		"require off": func(c *config.Trust) { c.Policies[0].Require = false },
		"log added":   func(c *config.Trust) { c.Policies[0].TLogKeys = []string{filepath.Join(dir, "b.pub")} },
		"image glob":  func(c *config.Trust) { c.Policies[0].Images = []string{"quay.io/org/*"} },
		"sources":     func(c *config.Trust) { c.Policies[0].RequireSource = []string{"https://github.com/org/*"} },
		"other sources": func(c *config.Trust) {
			c.Policies[0].RequireSource = []string{"https://github.com/org/*", "https://gitlab.com/org/*"}
		},
	} {
		c := config.Trust{Policies: []config.TrustPolicy{trust.Policies[0], trust.Policies[1]}}
		c.Policies[0].Repositories = append([]string(nil), c.Policies[0].Repositories...)
		c.Policies[1].Keys = append([]string(nil), c.Policies[1].Keys...)
		change(&c)
		q, err := NewPolicy("trust", c)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seen[q.Fingerprint()]; dup {
			t.Errorf("%s: same fingerprint as %s", name, prev)
		}
		seen[q.Fingerprint()] = name
	}
	var none *Policy
	if _, ok := none.For("stable/kafka"); ok || !none.Empty() || none.Requires("stable/kafka") {
		t.Error("a nil policy covers something")
	}
}

func TestNewPolicyRefuses(t *testing.T) {
	dir := t.TempDir()
	keyPair(t, dir, "good")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good.pub")
	for _, tc := range []struct {
		name   string
		policy config.TrustPolicy
		want   string
	}{
		{"missing key file", config.TrustPolicy{Repositories: []string{"a/*"}, Keys: []string{good, filepath.Join(dir, "missing.pub")}}, "trust.policies[0].keys[1]: open " + filepath.Join(dir, "missing.pub")},
		{"not a PEM key", config.TrustPolicy{Repositories: []string{"a/*"}, Keys: []string{notPEM}}, "trust.policies[0].keys[0]: " + notPEM + ": not a PEM public key"},
		{"a private key", config.TrustPolicy{Repositories: []string{"a/*"}, Keys: []string{filepath.Join(dir, "good.key")}}, "not a PEM public key"},
		{"no keys", config.TrustPolicy{Repositories: []string{"a/*"}}, "trust.policies[0].keys: at least one public key file is required"},
		{"bad glob", config.TrustPolicy{Repositories: []string{"a/["}, Keys: []string{good}}, "trust.policies[0].repositories[0]: bad glob"},
		{"missing log key", config.TrustPolicy{Repositories: []string{"a/*"}, Keys: []string{good}, TLogKeys: []string{filepath.Join(dir, "rekor.pub")}}, "trust.policies[0].tlogKeys: open " + filepath.Join(dir, "rekor.pub")},
		{"log key not PEM", config.TrustPolicy{Repositories: []string{"a/*"}, Keys: []string{good}, TLogKeys: []string{notPEM}}, "trust.policies[0].tlogKeys: " + notPEM + ": not a PEM public key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewPolicy("trust", config.Trust{Policies: []config.TrustPolicy{tc.policy}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewPolicy = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadSignerRefuses(t *testing.T) {
	dir := t.TempDir()
	keyPair(t, dir, "k")
	for _, tc := range []struct {
		name, file, password, want string
	}{
		{"wrong password", filepath.Join(dir, "k.key"), "nope", "cannot decrypt the private key: wrong password (set COSIGN_PASSWORD)"},
		{"a public key", filepath.Join(dir, "k.pub"), "pw", "not a cosign private key"},
		{"missing file", filepath.Join(dir, "none.key"), "pw", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadSigner(tc.file, []byte(tc.password))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadSigner = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestAdmit(t *testing.T) {
	dir := t.TempDir()
	trusted, trustedKey := keyPair(t, dir, "trusted")
	subject := digest.FromString("the version")
	policy := NewPolicyOf(
		Rule{Repositories: []string{"stable/*"}, Keys: []Key{trustedKey}, Require: true},
		Rule{Repositories: []string{"incubator/*"}, Keys: []Key{trustedKey}},
	)
	f := newFake()
	ctx := context.Background()
	for _, repo := range []string{"incubator/kafka", "dev/kafka"} {
		if err := Admit(ctx, f, policy, repo, "1.0.0", subject.String()); err != nil {
			t.Errorf("Admit into %s, which requires nothing: %v", repo, err)
		}
	}
	err := Admit(ctx, f, policy, "stable/kafka", "1.0.0", subject.String())
	if err == nil || !strings.Contains(err.Error(), "stable/kafka:1.0.0: "+subject.String()+" has no signature verified by the trust policy for stable/* (no signature)") {
		t.Fatalf("Admit of an unsigned version = %v", err)
	}
	body := cosignPayload(t, subject)
	f.tags[SignatureTag(subject)] = f.manifest("", nil, f.sigLayer(body, sign(t, trusted, body))).Digest.String()
	if err := Admit(ctx, f, policy, "stable/kafka", "1.0.0", subject.String()); err != nil {
		t.Fatalf("Admit of a signed version: %v", err)
	}
	f.failing = errors.New("storage down")
	if err := Admit(ctx, f, policy, "stable/kafka", "1.0.0", subject.String()); err == nil || !strings.Contains(err.Error(), "storage down") {
		t.Fatalf("Admit with the registry failing = %v", err)
	}
}

func TestNewPolicyNamesKeysWithoutPrefix(t *testing.T) {
	_, err := NewPolicy("", config.Trust{Policies: []config.TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"/nonexistent.pub"}}}})
	if err == nil || !strings.HasPrefix(err.Error(), "policies[0].keys[0]: open /nonexistent.pub") {
		t.Fatalf("NewPolicy with no prefix = %v, want an error starting policies[0].keys[0]", err)
	}
}
