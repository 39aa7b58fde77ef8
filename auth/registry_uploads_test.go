package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/config"
)

func TestRegistryMountNeedsPullOnFrom(t *testing.T) {
	e := newEnv(t)
	layer := e.blobs["b/app"].layer.Digest.String()
	for _, tc := range []struct {
		who, repo, from string
		form            bool // the parameters in a form body rather than the query
		want            int
	}{
		{alice, "a/app", "b/app", false, http.StatusAccepted},
		{alice, "a/app", "b/app", true, http.StatusAccepted},
		{alice, "a/app", "b/never-created", false, http.StatusAccepted},
		{pusher, "a/new", "b/app", false, http.StatusAccepted},
		{bob, "b/new", "b/app", false, http.StatusCreated},
		{bob, "b/new2", "b/app", true, http.StatusCreated},
		{admin, "a/new", "b/app", false, http.StatusCreated},
	} {
		params := url.Values{"mount": {layer}, "from": {tc.from}}.Encode()
		target, body, ct := "/v2/"+tc.repo+"/blobs/uploads/?"+params, "", ""
		if tc.form {
			target, body, ct = "/v2/"+tc.repo+"/blobs/uploads/", params, "application/x-www-form-urlencoded"
		}
		w := do(e.gate, tc.who, http.MethodPost, target, ct, []byte(body))
		what := fmt.Sprintf("%s: mount %s from %s into %s (form %v)", tc.who, layer, tc.from, tc.repo, tc.form)
		if w.Code != tc.want {
			t.Errorf("%s = %d %s, want %d", what, w.Code, w.Body, tc.want)
		}
		scan(t, tc.who, tc.repo, what, w)
		if tc.want == http.StatusAccepted && !strings.Contains(w.Header().Get("Location"), "/v2/"+tc.repo+"/blobs/uploads/") {
			t.Errorf("%s: Location %q is no upload", what, w.Header().Get("Location"))
		}
	}
}

func TestRegistryUploadsAreBoundToTheirSubject(t *testing.T) {
	e := newEnv(t)
	start := func(who string) string {
		t.Helper()
		w := do(e.gate, who, http.MethodPost, "/v2/a/app/blobs/uploads/", "", nil)
		if w.Code != http.StatusAccepted {
			t.Fatalf("%s: start upload: %d %s", who, w.Code, w.Body)
		}
		return w.Header().Get("Location")
	}
	// What a request on an upload that does not exist gets: alice's own
	// upload, once cancelled, through the raw registry.
	gone := start(alice)
	if w := do(e.gate, alice, http.MethodDelete, gone, "", nil); w.Code != http.StatusNoContent {
		t.Fatalf("alice: cancel upload: %d %s", w.Code, w.Body)
	}
	loc := start(alice)
	data := []byte("alice's blob")
	for _, tc := range []struct {
		method, query string
		body          []byte
	}{
		{http.MethodGet, "", nil},
		{http.MethodHead, "", nil},
		{http.MethodPatch, "", data},
		{http.MethodPut, "&digest=sha256:" + strings.Repeat("0", 64), data},
		{http.MethodDelete, "", nil},
	} {
		want := do(e.raw, "", tc.method, gone+tc.query, "application/octet-stream", tc.body)
		for _, who := range []string{pusher, admin, signer} {
			w := do(e.gate, who, tc.method, loc+tc.query, "application/octet-stream", tc.body)
			if got, want := normalized(w, "a/app"), normalized(want, "a/app"); got != want {
				t.Errorf("%s: %s on alice's upload answers\n%s\nwant, as on an upload that does not exist,\n%s", who, tc.method, got, want)
			}
		}
		if want.Code != http.StatusNotFound || !strings.Contains(want.Body.String(), "BLOB_UPLOAD_UNKNOWN") && tc.method != http.MethodHead {
			t.Errorf("%s on a cancelled upload = %d %s, want 404 BLOB_UPLOAD_UNKNOWN", tc.method, want.Code, want.Body)
		}
	}
	// alice's upload is untouched, and hers to finish.
	w := do(e.gate, alice, http.MethodPatch, loc, "application/octet-stream", data)
	if w.Code != http.StatusAccepted {
		t.Fatalf("alice: PATCH her upload: %d %s", w.Code, w.Body)
	}
	w = do(e.gate, alice, http.MethodPut, w.Header().Get("Location")+"&digest="+digestOf(data), "", nil)
	if w.Code != http.StatusCreated {
		t.Fatalf("alice: finish her upload: %d %s", w.Code, w.Body)
	}
	// A signer may upload too (signature layers), to its own session.
	e.putBlob(t, e.gate, signer, "a/app", []byte("signature layer"), "application/octet-stream")
}

// TestRegistryUploadBindings: every request on an upload session whose URL
// does not bind it to the caller gets what a session that does not exist
// gets, and is audited; and every response naming the session binds it
// again in its Location.
func TestRegistryUploadBindings(t *testing.T) {
	e := newEnv(t)
	start := func() string {
		t.Helper()
		w := do(e.gate, alice, http.MethodPost, "/v2/a/app/blobs/uploads/", "", nil)
		if w.Code != http.StatusAccepted {
			t.Fatalf("alice: start upload: %d %s", w.Code, w.Body)
		}
		return w.Header().Get("Location")
	}
	loc, other := start(), start()
	own := query(t, loc).Get(UploadOwnerParam)
	if own == "" || query(t, loc).Get("_state") == "" {
		t.Fatalf("Location %q lacks %s or _state", loc, UploadOwnerParam)
	}
	bobSubject := identities[bob].Subject
	uuid := uploadUUID(t, loc)
	for _, tc := range []struct{ name, owner string }{
		{"missing", ""},
		{"forged", strings.Repeat("A", len(own))},
		{"another upload's", query(t, other).Get(UploadOwnerParam)},
		{"another subject's", e.gate.(*registryGate).uploads.BindUpload(uuid, bobSubject)},
		{"truncated", own[:len(own)-1]},
	} {
		e.audit.Reset()
		target := withOwner(t, loc, tc.owner)
		for _, method := range []string{http.MethodGet, http.MethodPatch, http.MethodDelete} {
			w := do(e.gate, alice, method, target, "application/octet-stream", []byte("x"))
			if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "BLOB_UPLOAD_UNKNOWN") {
				t.Errorf("%s binding: %s = %d %s, want 404 BLOB_UPLOAD_UNKNOWN", tc.name, method, w.Code, w.Body)
			}
		}
		if !strings.Contains(e.audit.String(), "does not bind it to this subject") {
			t.Errorf("%s binding: refusal not audited: %s", tc.name, e.audit)
		}
	}
	// The session is untouched, and every response binds it again.
	w := do(e.gate, alice, http.MethodGet, loc, "", nil)
	if w.Code != http.StatusNoContent || query(t, w.Header().Get("Location")).Get(UploadOwnerParam) != own {
		t.Fatalf("alice: GET her upload = %d, Location %q, want 204 bound by %s", w.Code, w.Header().Get("Location"), own)
	}
	w = do(e.gate, alice, http.MethodPatch, w.Header().Get("Location"), "application/octet-stream", []byte("data"))
	if w.Code != http.StatusAccepted || query(t, w.Header().Get("Location")).Get(UploadOwnerParam) != own {
		t.Fatalf("alice: PATCH her upload = %d, Location %q, want 202 bound by %s", w.Code, w.Header().Get("Location"), own)
	}
	w = do(e.gate, alice, http.MethodPut, w.Header().Get("Location")+"&digest="+digestOf([]byte("data")), "", nil)
	if w.Code != http.StatusCreated || strings.Contains(w.Header().Get("Location"), UploadOwnerParam) {
		t.Fatalf("alice: finish her upload = %d, Location %q, want 201 naming the blob", w.Code, w.Header().Get("Location"))
	}
}

// TestRegistryUploadsCrossReplicas: an upload opened through one replica is
// finished through another whose Authn has the same key file, and is
// refused to another subject there.
func TestRegistryUploadsCrossReplicas(t *testing.T) {
	e := newEnv(t)
	fa := newFixture(t, func(c *config.Auth) {
		c.Rules = append(c.Rules, config.AuthRule{Subjects: []string{"user:bob"}, Repositories: []string{"a/*"}, Actions: []string{"push"}})
	})
	fb := newReplica(t, fa.cfg, fa.revoked)
	gate := func(f *fixture) http.Handler {
		return Registry(e.raw, RegistryOptions{Authenticator: f.Authn, Policy: f.policy, Service: "berth", Audit: NewAuditor(f.auditLog), Uploads: f.Authn})
	}
	a, b := gate(fa), gate(fb)
	aliceCred, bobCred := "Basic "+b64("alice:alice-pw"), "Basic "+b64("bob:bob-pw")
	data := []byte("crossing replicas")
	w := do(a, aliceCred, http.MethodPost, "/v2/a/app/blobs/uploads/", "", nil)
	if w.Code != http.StatusAccepted {
		t.Fatalf("alice through A: start upload: %d %s", w.Code, w.Body)
	}
	loc := w.Header().Get("Location")
	if w := do(b, bobCred, http.MethodPatch, loc, "application/octet-stream", data); w.Code != http.StatusNotFound {
		t.Errorf("bob through B on alice's upload: %d %s, want 404", w.Code, w.Body)
	}
	if !strings.Contains(fb.auditLog.String(), "does not bind it to this subject") {
		t.Errorf("bob's attempt is not audited on B: %s", fb.auditLog)
	}
	w = do(b, aliceCred, http.MethodPatch, loc, "application/octet-stream", data)
	if w.Code != http.StatusAccepted {
		t.Fatalf("alice through B: PATCH: %d %s", w.Code, w.Body)
	}
	w = do(a, aliceCred, http.MethodPut, w.Header().Get("Location")+"&digest="+digestOf(data), "", nil)
	if w.Code != http.StatusCreated {
		t.Fatalf("alice through A: finish: %d %s", w.Code, w.Body)
	}
	// A replica with another key cannot check A's bindings.
	other := newFixture(t)
	w = do(a, aliceCred, http.MethodPost, "/v2/a/app/blobs/uploads/", "", nil)
	if w := do(gate(other), aliceCred, http.MethodGet, w.Header().Get("Location"), "", nil); w.Code != http.StatusNotFound {
		t.Errorf("alice through a replica with another key: %d, want 404", w.Code)
	}
}

func query(t *testing.T, loc string) url.Values {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// withOwner is loc with its binding replaced by owner, or removed when owner is "".
func withOwner(t *testing.T, loc, owner string) string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del(UploadOwnerParam)
	if owner != "" {
		q.Set(UploadOwnerParam, owner)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func uploadUUID(t *testing.T, loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path[strings.LastIndexByte(u.Path, '/')+1:]
}

func digestOf(b []byte) string { return digest.FromBytes(b).String() }
