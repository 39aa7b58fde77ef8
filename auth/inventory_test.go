package auth_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/sqlite"
	"github.com/berth-registry/berth/config"
)

// storedRepos is a registry's storage as GET /api/v1/inventory reads it.
type storedRepos map[string][]digest.Digest

func (s storedRepos) Inventory(_ context.Context, allow func(string) bool, fn func(string, []digest.Digest) error) error {
	for _, repo := range slices.Sorted(maps.Keys(s)) {
		if allow != nil && !allow(repo) {
			continue
		}
		if err := fn(repo, s[repo]); err != nil {
			return err
		}
	}
	return nil
}

// inventoryAPI serves the catalog API over an empty catalog and stored,
// under policy p (nil: auth off), behind auth.API.
func inventoryAPI(t *testing.T, p *auth.Policy, stored storedRepos) http.Handler {
	t.Helper()
	store, err := sqlite.Open(context.Background(), t.TempDir()+"/catalog.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	cat, err := catalog.New(catalog.Options{Store: store, Source: emptySource{}})
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(httpapi.Options{Catalog: cat, Authorizer: auth.CatalogAuthorizer{Policy: p}, Inventory: stored})
	return auth.API(auth.APIOptions{Authenticator: fakeAuthenticator{}, Policy: p})(api)
}

// TestInventoryUnderPolicy checks that GET /api/v1/inventory answers each
// caller the repositories it may pull, and nothing of the others.
func TestInventoryUnderPolicy(t *testing.T) {
	stored := storedRepos{}
	for _, repo := range []string{"a/aardvark", "a/aardvark-vault", "b/bison", "pub/puffin"} {
		stored[repo] = []digest.Digest{digest.FromString(repo)}
	}
	closed, err := auth.NewPolicy(&config.Auth{Rules: []config.AuthRule{
		{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		policy  *auth.Policy
		subject string
		status  int
		want    []string
	}{
		{"auth off", nil, "", 200, []string{"a/aardvark", "a/aardvark-vault", "b/bison", "pub/puffin"}},
		{"anonymous", testPolicy(t), "", 200, []string{"pub/puffin"}},
		{"reader", testPolicy(t), "reader", 200, []string{"a/aardvark", "pub/puffin"}},
		{"bob", testPolicy(t), "bob", 200, []string{"b/bison", "pub/puffin"}},
		{"root", testPolicy(t), "root", 200, []string{"a/aardvark", "a/aardvark-vault", "b/bison", "pub/puffin"}},
		{"anonymous, nothing public", closed, "", 200, []string{}},
		{"bad credentials", testPolicy(t), "bad", 401, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(inventoryAPI(t, tc.policy, stored), "GET", "/api/v1/inventory", tc.subject)
			if res.status != tc.status {
				t.Fatalf("%d %s, want %d", res.status, res.body, tc.status)
			}
			if tc.status != 200 {
				return
			}
			var inv apiv1.Inventory
			if err := json.Unmarshal([]byte(res.body), &inv); err != nil {
				t.Fatal(err)
			}
			if got := slices.Sorted(maps.Keys(inv.Repositories)); inv.Repositories == nil || !slices.Equal(got, tc.want) {
				t.Errorf("repositories %v (%s), want %v", got, res.body, tc.want)
			}
			for repo, ds := range inv.Repositories {
				if !slices.Equal(ds, stored[repo]) {
					t.Errorf("%s: %v, want %v", repo, ds, stored[repo])
				}
			}
		})
	}
}
