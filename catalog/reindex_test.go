package catalog_test

import (
	"context"
	"database/sql"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	_ "modernc.org/sqlite"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// gatedSource holds every manifest read until its gate opens.
type gatedSource struct {
	sourceWriter
	gate *atomic.Pointer[chan struct{}]
}

type sourceWriter interface {
	catalog.Source
	olm.Writer
}

func (g gatedSource) Manifest(ctx context.Context, repo, digest string) (string, []byte, error) {
	select {
	case <-*g.gate.Load():
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
	return g.sourceWriter.Manifest(ctx, repo, digest)
}

// TestReindexUpgradesInBackground stores OLM versions as an older berth
// did (index version 1, no alm-examples recorded) and restarts: the
// catalog is ready and searchable while the re-index cannot read a single
// manifest, then reads every version again, records their examples, and
// reports it in its metric and its status.
func TestReindexUpgradesInBackground(t *testing.T) {
	gate := new(atomic.Pointer[chan struct{}])
	open := make(chan struct{})
	close(open)
	gate.Store(&open)
	e := newEnv(t, envOptions{source: func(s catalog.Source) catalog.Source {
		w, ok := s.(sourceWriter)
		if !ok {
			t.Fatalf("%T is not an olm.Writer", s)
		}
		return gatedSource{sourceWriter: w, gate: gate}
	}})
	ps := loadRepository(t, "olm-community/api-operator")
	for _, p := range ps {
		e.pushPackage("community", p)
	}
	e.waitFor("every version indexed", func() bool {
		st, err := e.cat.Status(e.ctx)
		return err == nil && st.Versions == len(ps)
	})
	examples := make(map[string]map[string][]string)
	for _, p := range ps {
		ex, recorded, err := e.cat.Examples(e.ctx, all, "community", "api-operator", p.Metadata.Version)
		if err != nil || !recorded {
			t.Fatalf("examples of %s: recorded %v, %v", p.Metadata.Version, recorded, err)
		}
		examples[p.Metadata.Version] = ex
	}
	latest := ps[len(ps)-1]
	if len(examples[latest.Metadata.Version]) == 0 {
		t.Fatalf("the latest version recorded no alm-examples: %v", examples)
	}
	// Recorded from the bundle's olm.csv.metadata, as the CSV gives them.
	for _, f := range latest.Files {
		if catalog.IsCSV(f.Path, int64(len(f.Data))) {
			want, err := pkgformat.CSVExamples(e.ctx, f.Path, f.Data, pkgformat.Limits{})
			if err != nil || !reflect.DeepEqual(examples[latest.Metadata.Version], want) {
				t.Fatalf("recorded examples %v, the CSV's %v (%v)", examples[latest.Metadata.Version], want, err)
			}
		}
	}

	e.current.Store(nil)
	e.stop()
	db, err := sql.Open("sqlite", e.path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE entries SET index_version = 1, examples = NULL`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	closed := make(chan struct{})
	gate.Store(&closed)
	reg := prometheus.NewRegistry()
	e.opts.metrics = reg
	started := time.Now()
	e.start(nil) // returns once the start-up reconciliation is done
	if err := e.cat.Ready(e.ctx, time.Second); err != nil {
		t.Fatalf("not ready while the re-index waits: %v", err)
	}
	if res, err := e.cat.Search(e.ctx, catalog.Query{Text: "api-operator", Access: all}); err != nil || res.Total != 1 {
		t.Fatalf("search while the re-index waits: %+v, %v", res, err)
	}
	st, err := e.cat.Status(e.ctx)
	if err != nil || st.Reindex.Pending != len(ps) || st.Reindex.Done != 0 || st.Reindex.IndexVersion != catalog.IndexVersion {
		t.Fatalf("status while the re-index waits: %+v, %v; want %d pending", st.Reindex, err, len(ps))
	}
	if _, recorded, err := e.cat.Examples(e.ctx, all, "community", "api-operator", ps[0].Metadata.Version); err != nil || recorded {
		t.Fatalf("examples of an old version: recorded %v, %v; want not recorded", recorded, err)
	}
	t.Logf("ready and searchable %v after the start, the re-index held", time.Since(started))

	close(closed)
	e.waitFor("the re-index", func() bool {
		st, err := e.cat.Status(e.ctx)
		return err == nil && st.Reindex.Pending == 0 && st.Reindex.Done == int64(len(ps))
	})
	e.waitFor("the pending gauge at 0", func() bool { return gaugeValue(t, reg, "pending") == 0 })
	if done := gaugeValue(t, reg, "done"); done != float64(len(ps)) {
		t.Errorf("berth_catalog_reindex_versions{state=done} = %v, want %d", done, len(ps))
	}
	for _, p := range ps {
		ex, recorded, err := e.cat.Examples(e.ctx, all, "community", "api-operator", p.Metadata.Version)
		if err != nil || !recorded || !reflect.DeepEqual(ex, examples[p.Metadata.Version]) {
			t.Errorf("examples of %s after the re-index: %v, recorded %v, %v", p.Metadata.Version, ex, recorded, err)
		}
	}
}

// gaugeValue reads berth_catalog_reindex_versions{state}.
func gaugeValue(t *testing.T, reg *prometheus.Registry, state string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if mf.GetName() == "berth_catalog_reindex_versions" && l.GetName() == "state" && l.GetValue() == state {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
