package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
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
	if _, ok := e.gate.(*registryGate).uploads.owner(uploadUUID(t, loc)); ok {
		t.Error("a finished upload is still remembered")
	}
	// A signer may upload too (signature layers), to its own session.
	e.putBlob(t, e.gate, signer, "a/app", []byte("signature layer"), "application/octet-stream")
}

func uploadUUID(t *testing.T, loc string) string {
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path[strings.LastIndexByte(u.Path, '/')+1:]
}

func TestUploadOwnersAreBounded(t *testing.T) {
	now := time.Unix(0, 0)
	u := newUploadOwners(3, time.Hour, func() time.Time { return now })
	for i := range 5 {
		u.bind(fmt.Sprint(i), fmt.Sprint("user:", i))
	}
	for i, want := range []bool{false, false, true, true, true} {
		if s, ok := u.owner(fmt.Sprint(i)); ok != want || ok && s != fmt.Sprint("user:", i) {
			t.Errorf("owner(%d) = %q %v, want known %v", i, s, ok, want)
		}
	}
	// Using an upload keeps it: 2 is the least recently used now.
	u.owner("2")
	u.owner("3")
	now = now.Add(30 * time.Minute)
	u.owner("4")
	u.bind("5", "user:5")
	if _, ok := u.owner("2"); ok {
		t.Error("the least recently used upload was kept past the bound")
	}
	now = now.Add(45 * time.Minute)
	for id, want := range map[string]bool{"3": false, "4": true, "5": true} {
		if _, ok := u.owner(id); ok != want {
			t.Errorf("after 75 minutes owner(%s) known = %v, want %v", id, ok, want)
		}
	}
	u.forget("4")
	if _, ok := u.owner("4"); ok || u.lru.Len() != 1 || len(u.byID) != 1 {
		t.Errorf("after forget: %d in the list, %d in the map, want 1", u.lru.Len(), len(u.byID))
	}
}

func digestOf(b []byte) string { return digest.FromBytes(b).String() }
