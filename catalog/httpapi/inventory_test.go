package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
)

// fakeInventory holds repos, in order; failAfter, when not zero, makes the
// walk fail after that many repositories were reported.
type fakeInventory struct {
	repos     map[string][]digest.Digest
	failAfter int
	asked     []string // the repositories allow was asked about
}

func (f *fakeInventory) Inventory(ctx context.Context, allow func(string) bool, fn func(string, []digest.Digest) error) error {
	reported := 0
	for _, repo := range slices.Sorted(maps.Keys(f.repos)) {
		if f.failAfter > 0 && reported == f.failAfter {
			return errors.New("storage: read /var/lib/berth/docker/registry/v2: input/output error")
		}
		f.asked = append(f.asked, repo)
		if allow != nil && !allow(repo) {
			continue
		}
		if err := fn(repo, f.repos[repo]); err != nil {
			return err
		}
		reported++
	}
	return nil
}

func digestsOf(names ...string) []digest.Digest {
	ds := make([]digest.Digest, len(names))
	for i, n := range names {
		ds[i] = digest.FromString(n)
	}
	slices.Sort(ds)
	return ds
}

func newFakeInventory() *fakeInventory {
	return &fakeInventory{repos: map[string][]digest.Digest{
		"kudo/kafka":     digestsOf("kafka manifest", "kafka config", "shared layer"),
		"kudo/zookeeper": digestsOf("zk manifest", "shared layer"),
		"olm/etcd":       digestsOf("etcd manifest"),
		"library":        digestsOf("library manifest"),
		"olm/empty":      {},
	}}
}

func inventoryHandler(inv httpapi.Inventory, auth catalog.Authorizer, logs io.Writer) http.Handler {
	if logs == nil {
		logs = io.Discard
	}
	return httpapi.New(httpapi.Options{Catalog: newFake(), Authorizer: auth, Inventory: inv, Logger: slog.New(slog.NewTextHandler(logs, nil))})
}

func TestInventoryEndpoint(t *testing.T) {
	all := newFakeInventory().repos
	for _, tc := range []struct {
		name   string
		auth   catalog.Authorizer
		want   []string // the repositories answered
		unread []string // repositories that must not be read
	}{
		{"auth off", nil, []string{"kudo/kafka", "kudo/zookeeper", "library", "olm/empty", "olm/etcd"}, nil},
		{"everything", fakeAuth{access: catalog.Access{All: true}}, []string{"kudo/kafka", "kudo/zookeeper", "library", "olm/empty", "olm/etcd"}, nil},
		{"one namespace", fakeAuth{access: catalog.NamespaceAccess("kudo")}, []string{"kudo/kafka", "kudo/zookeeper"}, []string{"olm/etcd", "library"}},
		{"one package", fakeAuth{access: catalog.Access{Pull: func(ns, name string) bool { return ns+"/"+name == "olm/etcd" }}}, []string{"olm/etcd"}, []string{"kudo/kafka", "library"}},
		{"nothing", fakeAuth{access: catalog.Access{}}, []string{}, []string{"kudo/kafka", "olm/etcd", "library"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := time.Now().Add(-time.Second)
			res := serve(t, inventoryHandler(newFakeInventory(), tc.auth, nil), "GET", "/api/v1/inventory", nil)
			if res.status != 200 || res.header.Get("Content-Type") != apiv1.MediaTypeJSON {
				t.Fatalf("%d %s: %s", res.status, res.header.Get("Content-Type"), res.body)
			}
			var inv apiv1.Inventory
			res.decode(t, &inv)
			if inv.MediaType != apiv1.InventoryMediaType || inv.Registry != "" || inv.Taken.Before(before) || inv.Taken.After(time.Now()) {
				t.Errorf("inventory %+v", inv)
			}
			if inv.Repositories == nil {
				t.Fatalf("repositories null: %s", res.body)
			}
			if got := slices.Sorted(maps.Keys(inv.Repositories)); !slices.Equal(got, tc.want) {
				t.Errorf("repositories %v, want %v", got, tc.want)
			}
			for repo, ds := range inv.Repositories {
				if !slices.Equal(ds, all[repo]) {
					t.Errorf("%s: %v, want %v", repo, ds, all[repo])
				}
			}
			if bytes.Contains(res.body, []byte("null")) {
				t.Errorf("body has null: %s", res.body)
			}
			for _, repo := range tc.unread {
				if bytes.Contains(res.body, []byte(repo)) {
					t.Errorf("the answer names %s: %s", repo, res.body)
				}
			}
		})
	}
}

func TestInventoryEndpointErrors(t *testing.T) {
	t.Run("split mode", func(t *testing.T) {
		res := serve(t, inventoryHandler(nil, nil, nil), "GET", "/api/v1/inventory", nil)
		if e := res.apiError(t); res.status != 501 || e.Code != "NOT_IMPLEMENTED" || !strings.Contains(e.Message, "berth serve catalog") {
			t.Errorf("%d %s, want 501 NOT_IMPLEMENTED naming berth serve catalog", res.status, res.body)
		}
	})
	t.Run("refused", func(t *testing.T) {
		inv := newFakeInventory()
		res := serve(t, inventoryHandler(inv, fakeAuth{pullErr: fmt.Errorf("token expired: %w", catalog.ErrDenied)}, nil), "GET", "/api/v1/inventory", nil)
		if res.status != 403 || res.apiError(t).Code != "DENIED" || len(inv.asked) != 0 {
			t.Errorf("%d %s, storage read for %v; want 403 DENIED, nothing read", res.status, res.body, inv.asked)
		}
	})
	t.Run("parameter", func(t *testing.T) {
		res := serve(t, inventoryHandler(newFakeInventory(), nil, nil), "GET", "/api/v1/inventory?repository=kudo/kafka", nil)
		if res.status != 400 || res.apiError(t).Code != "INVALID" {
			t.Errorf("%d %s, want 400 INVALID", res.status, res.body)
		}
	})
	t.Run("storage fails first", func(t *testing.T) {
		var logs bytes.Buffer
		h := inventoryHandler(failingInventory{}, nil, &logs)
		res := serve(t, withRequestID(h), "GET", "/api/v1/inventory", nil)
		if e := res.apiError(t); res.status != 500 || e.Code != "INTERNAL" || strings.Contains(e.Message, "/var/lib") {
			t.Errorf("%d %s, want 500 INTERNAL without the storage's path", res.status, res.body)
		}
		if !strings.Contains(logs.String(), "/var/lib") {
			t.Errorf("the cause was not logged: %s", logs.String())
		}
	})
	t.Run("storage fails midway", func(t *testing.T) {
		inv := newFakeInventory()
		inv.failAfter = 2
		var logs bytes.Buffer
		srv := httptest.NewServer(inventoryHandler(inv, nil, &logs))
		defer srv.Close()
		res, err := http.Get(srv.URL + "/api/v1/inventory")
		var body []byte
		if err == nil {
			defer res.Body.Close()
			body, err = io.ReadAll(res.Body)
		}
		var doc apiv1.Inventory
		if err == nil || json.Unmarshal(body, &doc) == nil {
			t.Errorf("a failed inventory was served as complete: %s", body)
		}
		srv.Close()
		if !strings.Contains(logs.String(), "response failed after it started") {
			t.Errorf("not logged: %s", logs.String())
		}
	})
}

// failingInventory cannot list the storage.
type failingInventory struct{}

func (failingInventory) Inventory(context.Context, func(string) bool, func(string, []digest.Digest) error) error {
	return errors.New("storage: list /var/lib/berth/docker/registry/v2/repositories: permission denied")
}
