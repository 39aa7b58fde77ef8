package maintenance

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// noVersions is a catalog that has indexed nothing.
type noVersions struct{}

func (noVersions) Walk(context.Context, catalog.Access, string, func(*catalog.Entry) error) error {
	return nil
}

func newMaintenance(t *testing.T, cfg *config.Config) *Maintenance {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	reg, err := registry.New(context.Background(), registry.Options{Storage: &storage.Config{Driver: "inmemory"}, HTTPSecret: "test", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	m, err := New(Options{Config: cfg, Registry: reg, Catalog: noVersions{}, Logger: log, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// post serves one request to h as id (nil: no identity in the context, as
// with auth off).
func post(h http.Handler, method, target string, id *auth.Identity) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, target, nil)
	if id != nil {
		req = req.WithContext(auth.WithIdentity(req.Context(), *id))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

func TestHandler(t *testing.T) {
	tests := []struct {
		name, method, target string
		configDryRun         bool
		status               int
		// dryRun is the report's, when status is 200; else message is in
		// the error's.
		dryRun  bool
		message string
	}{
		{"dry run", http.MethodPost, GCPath + "?dryRun=true", false, http.StatusOK, true, ""},
		{"run", http.MethodPost, GCPath + "?dryRun=false", true, http.StatusOK, false, ""},
		{"1 is true", http.MethodPost, GCPath + "?dryRun=1", false, http.StatusOK, true, ""},
		{"default is gc.dryRun", http.MethodPost, GCPath, true, http.StatusOK, true, ""},
		{"default deletes without gc.dryRun", http.MethodPost, GCPath, false, http.StatusOK, false, ""},
		{"same twice", http.MethodPost, GCPath + "?dryRun=true&dryRun=true", false, http.StatusOK, true, ""},
		{"not a bool", http.MethodPost, GCPath + "?dryRun=maybe", false, http.StatusBadRequest, false, `dryRun="maybe": want true or false`},
		{"empty", http.MethodPost, GCPath + "?dryRun=", false, http.StatusBadRequest, false, `dryRun="": want true or false`},
		{"contradicts itself", http.MethodPost, GCPath + "?dryRun=true&dryRun=false", false, http.StatusBadRequest, false, "dryRun given 2 times (true, false): give it once"},
		{"unknown parameter", http.MethodPost, GCPath + "?dry=1", false, http.StatusBadRequest, false, `unknown parameter "dry": /api/v1/admin/gc takes only dryRun=true|false`},
		{"GET", http.MethodGet, GCPath, false, http.StatusMethodNotAllowed, false, "GET /api/v1/admin/gc: only POST starts a run"},
		{"other path", http.MethodPost, "/api/v1/admin/nothing", false, http.StatusNotFound, false, "no endpoint /api/v1/admin/nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMaintenance(t, &config.Config{GC: config.GC{DryRun: tt.configDryRun, Grace: time.Hour}})
			w := post(m.Handler(), tt.method, tt.target, nil)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.status == http.StatusOK {
				var rep Report
				if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
					t.Fatal(err)
				}
				if rep.DryRun != tt.dryRun {
					t.Errorf("dryRun %t, want %t", rep.DryRun, tt.dryRun)
				}
				return
			}
			var doc apiv1.Errors
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || len(doc.Errors) != 1 || !strings.Contains(doc.Errors[0].Message, tt.message) {
				t.Errorf("body %s (%v), want an error saying %q", w.Body, err, tt.message)
			}
		})
	}
}

// TestHandlerRefusesASecondRun asks for a run while one holds this
// process: 409, and the run in progress is not disturbed.
func TestHandlerRefusesASecondRun(t *testing.T) {
	m := newMaintenance(t, &config.Config{})
	m.running.Lock()
	w := post(m.Handler(), http.MethodPost, GCPath, nil)
	m.running.Unlock()
	if w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), "already in progress in this server; try again when it ends") {
		t.Errorf("during a run: %d %s, want 409 saying a run is in progress", w.Code, w.Body)
	}
	if w := post(m.Handler(), http.MethodPost, GCPath, nil); w.Code != http.StatusOK {
		t.Errorf("after the run: %d %s", w.Code, w.Body)
	}
}

// TestRunsDoNotOverlap starts runs at once from two Maintenances on one
// storage, as two replicas: they share the maintenance lock, so the second
// waits for the first instead of running beside it.
func TestRunsDoNotOverlap(t *testing.T) {
	a := newMaintenance(t, &config.Config{})
	b := newMaintenance(t, &config.Config{})
	b.opts.Locks = a.opts.Locks
	unlock, err := a.opts.Locks.Lock(context.Background(), maintenanceLock)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := b.Run(context.Background(), true, "test"); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("a run went on while another replica's held the lock (%v)", err)
	case <-time.After(100 * time.Millisecond):
	}
	unlock()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestAdminGate(t *testing.T) {
	cfg := &config.Auth{TokenTTL: time.Minute, Robots: config.Robots{MaxExpiry: time.Hour}, Metrics: "open", Rules: []config.AuthRule{
		{Subjects: []string{"user:root"}, Repositories: []string{"*/*"}, Actions: []string{"admin"}},
		{Subjects: []string{"user:alice"}, Repositories: []string{"a/*"}, Actions: []string{"admin"}},
	}}
	if err := cfg.Validate(""); err != nil {
		t.Fatal(err)
	}
	policy, err := auth.NewPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := newMaintenance(t, &config.Config{})
	anon := auth.AnonymousIdentity()
	tests := []struct {
		name    string
		policy  *auth.Policy
		id      *auth.Identity
		status  int
		message string
	}{
		{"administrator", policy, &auth.Identity{Subject: "user:root"}, http.StatusOK, ""},
		{"a namespace's administrator", policy, &auth.Identity{Subject: "user:alice"}, http.StatusForbidden, "the admin API is for administrators: "},
		{"anonymous", policy, &anon, http.StatusUnauthorized, "authentication required: the admin API is for administrators"},
		{"auth off", nil, nil, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := auth.AdminGate(tt.policy, "the admin API is for administrators")(m.Handler())
			w := post(h, http.MethodPost, GCPath+"?dryRun=true", tt.id)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.message) {
				t.Errorf("%d %s, want %d saying %q", w.Code, w.Body, tt.status, tt.message)
			}
		})
	}
}
