package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/storetest"
	"github.com/berth-registry/berth/internal/sqlitedb"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// searchJSON runs each query on s and returns the results as JSON.
func searchJSON(t *testing.T, s *Store, queries []catalog.Query) []string {
	t.Helper()
	var out []string
	for _, q := range queries {
		res, err := s.Search(context.Background(), q)
		if err != nil {
			t.Fatalf("Search %+v: %v", q, err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	return out
}

// indexQueries exercise every part of a search document of genEntries; some
// ask for what the package of e holds.
func indexQueries(e *catalog.Entry) []catalog.Query {
	all := catalog.Access{All: true}
	yes := true
	kube, _ := catalog.KubeVersionKey("1.20")
	md := e.Metadata
	qs := []catalog.Query{
		{Limit: catalog.MaxLimit},
		{Sort: catalog.SortUpdated, Limit: catalog.MaxLimit},
		{Text: "kafka", Limit: catalog.MaxLimit},
		{Text: "operator cluster", Limit: catalog.MaxLimit},
		{Text: "postg", Sort: catalog.SortUpdated, Limit: catalog.MaxLimit},
		{Text: md.Maintainers[0].Name, Limit: catalog.MaxLimit},
		{Text: "example io", Limit: catalog.MaxLimit},
		{Format: md.Format, Channel: md.Channels[len(md.Channels)-1].Name, Limit: catalog.MaxLimit},
		{Verified: &yes, KubeVersion: kube, Limit: catalog.MaxLimit},
		{Provides: catalog.APIFilter{Kind: md.ProvidedAPIs[0].Kind}, Limit: catalog.MaxLimit},
		{Namespace: "stable", Sort: catalog.SortName, Limit: catalog.MaxLimit},
	}
	for i := range qs {
		qs[i].Access = all
	}
	return qs
}

// TestIndexMatchesTables applies random Puts and Deletes, then checks that
// the index those writes kept answers as the one built from the file at the
// next open.
func TestIndexMatchesTables(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	s := openAt(t, path).(*Store)
	entries := genEntries(40)
	r := rand.New(rand.NewPCG(8, 9))
	var put []*catalog.Entry
	for range 600 {
		e := entries[r.IntN(len(entries))]
		switch n := r.IntN(10); {
		case n < 2 && len(put) > 0:
			d := put[r.IntN(len(put))]
			if _, err := s.Delete(ctx, d.Namespace, d.Name, d.Tag); err != nil {
				t.Fatal(err)
			}
		case n < 3:
			// Re-point the tag to another build, or make it unreadable.
			other := *e
			other.Digest = fmt.Sprintf("sha256:%064x", r.IntN(1<<20))
			if md := *e.Metadata; r.IntN(2) == 0 {
				md.Description = "rebuilt " + md.Description
				md.Keywords = []string{"rebuilt"}
				other.Metadata = &md
			} else {
				other.Status, other.Reason, other.Metadata = apiv1.StatusInvalid, "unreadable", nil
			}
			if _, err := s.Put(ctx, &other); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := s.Put(ctx, e); err != nil {
				t.Fatal(err)
			}
			put = append(put, e)
		}
	}
	if _, err := s.Put(ctx, entries[0]); err != nil {
		t.Fatal(err)
	}
	queries := indexQueries(entries[0])
	incremental := searchJSON(t, s, queries)
	s.Close()
	s = openAt(t, path).(*Store)
	defer s.Close()
	rebuilt := searchJSON(t, s, queries)
	nonEmpty := 0
	for i, q := range queries {
		if incremental[i] != rebuilt[i] {
			t.Errorf("%+v:\nincremental %.400s\nrebuilt     %.400s", q, incremental[i], rebuilt[i])
		}
		if rebuilt[i] != searchJSON(t, s, []catalog.Query{{Limit: 1, Text: "nothing-at-all", Access: q.Access}})[0] {
			nonEmpty++
		}
	}
	if nonEmpty < len(queries) {
		t.Errorf("only %d of %d queries match something: the check proves little", nonEmpty, len(queries))
	}
}

// TestFailedWriteLeavesIndex makes the last statement of a write fail and
// checks that the search index did not take the write.
func TestFailedWriteLeavesIndex(t *testing.T) {
	ctx := context.Background()
	s := openAt(t, filepath.Join(t.TempDir(), "catalog.db")).(*Store)
	defer s.Close()
	entries := genEntries(2)
	if _, err := s.Put(ctx, entries[0]); err != nil {
		t.Fatal(err)
	}
	queries := indexQueries(entries[0])
	before := searchJSON(t, s, queries)
	// Every write appends to changes last: without the table, it fails
	// after the entry and the package row were written.
	if _, err := s.writer.ExecContext(ctx, `ALTER TABLE changes RENAME TO changes_away`); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries[1:] {
		if _, err := s.Put(ctx, e); err == nil {
			t.Fatalf("Put %s/%s:%s succeeded without the changes table", e.Namespace, e.Name, e.Tag)
		}
	}
	if _, err := s.Delete(ctx, entries[0].Namespace, entries[0].Name, entries[0].Tag); err == nil {
		t.Fatal("Delete succeeded without the changes table")
	}
	if after := searchJSON(t, s, queries); !slices.Equal(after, before) {
		t.Errorf("failed writes changed the search results")
	}
	if _, err := s.writer.ExecContext(ctx, `ALTER TABLE changes_away RENAME TO changes`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, entries[1]); err != nil {
		t.Fatal(err)
	}
	if after := searchJSON(t, s, queries); slices.Equal(after, before) {
		t.Errorf("a write after the failed ones changed no search result")
	}
}

// TestMigrateFromVersion1 opens a file of schema version 1, which searched
// with FTS5, and checks that the full text only FTS5 held is still searched.
func TestMigrateFromVersion1(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", sqlitedb.DSN(path, false, options))
	if err != nil {
		t.Fatal(err)
	}
	md := pkgformat.Metadata{
		SchemaVersion: pkgformat.MetadataSchemaVersion, Name: "kafka", Version: "1.0.0", Format: pkgformat.KUDO,
		DisplayName: "Kafka", Description: "Streams.", Keywords: []string{"streaming"},
		Maintainers:  []pkgformat.Maintainer{{Name: "Grace Hopper"}},
		Channels:     []pkgformat.Channel{{Name: "stable"}},
		ProvidedAPIs: []pkgformat.API{{Group: "kafka.example.io", Version: "v1", Kind: "KafkaTopic"}},
		Files:        []pkgformat.FileInfo{},
		// With images, so that step 5 (images) keeps the digest.
		Images: []pkgformat.Image{{Reference: "docker.io/library/kafka:1", Found: []string{"test"}}},
	}
	mdJSON, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	// What version 1 wrote for one indexed version.
	for _, stmt := range []string{
		migrations[0],
		`INSERT INTO entries (id, namespace, name, tag, version_key, digest, status, reason, indexed, verified,
		kube_min, kube_max, content_digest, content_size, content_media_type, metadata)
		VALUES (1, 'a', 'kafka', '1.0.0', '` + catalog.VersionKey("1.0.0") + `', 'sha256:1', 'indexed', '', 1000, 1,
		'', '', 'sha256:2', 10, 'application/x-tar', '` + string(mdJSON) + `')`,
		`INSERT INTO entry_channels VALUES (1, 'a', 'kafka', 'stable')`,
		`INSERT INTO entry_apis VALUES (1, 'a', 'kafka', 'kafka.example.io', 'kafkatopic')`,
		`INSERT INTO packages (id, namespace, name, name_lower, version, digest, format, display_name, description,
		app_version, keywords, channels, created, updated, verified)
		VALUES (7, 'a', 'kafka', 'kafka', '1.0.0', 'sha256:1', 'kudo', 'Kafka', 'Streams.', '', '["streaming"]',
		'["stable"]', NULL, 1000, 1)`,
		`INSERT INTO packages_fts (rowid, name, display_name, description, keywords, maintainers, apis)
		VALUES (7, 'kafka', 'Kafka', 'Streams.', 'streaming', 'Grace Hopper', 'KafkaTopic kafka.example.io')`,
		`INSERT INTO changes (action, namespace, name, tag, digest, status, time) VALUES ('put', 'a', 'kafka', '1.0.0', 'sha256:1', 'indexed', 1000)`,
		`PRAGMA user_version = 1`,
	} {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	db.Close()

	s := openAt(t, path).(*Store)
	defer s.Close()
	for _, q := range []catalog.Query{
		{Text: "hopper"}, {Text: "kafkatopic"}, {Text: "example"}, {Text: "streaming"},
		{Channel: "stable"}, {Provides: catalog.APIFilter{Kind: "KafkaTopic"}}, {Format: pkgformat.KUDO},
	} {
		q.Access = catalog.Access{All: true}
		res, err := s.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Packages) != 1 || res.Packages[0].Name != "kafka" || !res.Packages[0].Verified {
			t.Errorf("%+v after the migration: %+v", q, res.Packages)
		}
	}
	var version, fts int
	if err := s.reader.QueryRowContext(ctx, `SELECT (SELECT user_version FROM pragma_user_version),
	(SELECT count(*) FROM sqlite_schema WHERE name LIKE 'packages_fts%')`).Scan(&version, &fts); err != nil {
		t.Fatal(err)
	}
	if version != len(migrations) || fts != 0 {
		t.Errorf("after the migration: schema version %d, %d FTS5 tables; want %d, 0", version, fts, len(migrations))
	}
	// A version indexed before signatures were checked takes its first check's verdict.
	if changed, err := s.PutSignatures(ctx, &catalog.SignatureCheck{Namespace: "a", Name: "kafka", Digest: "sha256:1", Policy: "p"}); err != nil || !changed {
		t.Errorf("PutSignatures after the migration = %v, %v; want changed", changed, err)
	}
	if res, err := s.Search(ctx, catalog.Query{Verified: new(bool), Access: catalog.Access{All: true}}); err != nil || res.Total != 1 {
		t.Errorf("verified=false after the first check: %v, %v; want a/kafka", res, err)
	}
	// Writes go on where version 1 left off.
	e := genEntries(1)[0]
	if _, err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Search(ctx, catalog.Query{Access: catalog.Access{All: true}}); err != nil || res.Total != 2 {
		t.Errorf("after a Put: %v, %v; want 2 packages", res, err)
	}
}

// migratedFrom writes a file of schema version, with an indexed version
// a/NAME 1.0.0 of each metadata, and opens it, which migrates it; it
// returns the store and the digest each version then has.
func migratedFrom(t *testing.T, version int, mds ...pkgformat.Metadata) (catalog.Store, map[string]string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", sqlitedb.DSN(path, false, options))
	if err != nil {
		t.Fatal(err)
	}
	stmts := slices.Clone(migrations[:version])
	for _, md := range mds {
		md.SchemaVersion, md.Version = pkgformat.MetadataSchemaVersion, "1.0.0"
		b, err := json.Marshal(md)
		if err != nil {
			t.Fatal(err)
		}
		stmts = append(stmts, `INSERT INTO entries (namespace, name, tag, version_key, digest, status, reason, indexed, verified,
		kube_min, kube_max, content_digest, content_size, content_media_type, metadata)
		VALUES ('a', '`+md.Name+`', '1.0.0', '`+catalog.VersionKey("1.0.0")+`', 'sha256:`+md.Name+`', 'indexed', '', 1000, 0,
		'', '', 'sha256:c', 10, 'application/x-tar', '`+string(b)+`')`)
	}
	stmts = append(stmts, fmt.Sprintf(`PRAGMA user_version = %d`, version))
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	db.Close()

	s := openAt(t, path)
	t.Cleanup(func() { s.Close() })
	tags, err := s.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, td := range tags {
		digests[td.Name] = td.Digest
	}
	return s, digests
}

// TestMigrateToImages opens a file of schema version 4, from before images,
// and checks that its versions without images in their metadata, and only
// they, lose their digest, so that the reconciliation at start indexes them
// again and derives their images; and that images and mirrors are then
// recorded.
func TestMigrateToImages(t *testing.T) {
	ctx := context.Background()
	s, got := migratedFrom(t, 4, pkgformat.Metadata{Name: "old", Format: pkgformat.Helm},
		pkgformat.Metadata{Name: "derived", Format: pkgformat.Helm, Images: []pkgformat.Image{{Reference: "quay.io/org/x:1", Found: []string{"test"}}}})
	if got["old"] != "" || got["derived"] != "sha256:derived" {
		t.Errorf("digests after the migration %v; want old's empty, derived's kept", got)
	}
	e := genEntries(1)[0]
	if _, err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	res, err := s.Search(ctx, catalog.Query{Image: catalog.ImageRef{Repository: "quay.io/" + e.Namespace + "/" + e.Name}, Access: catalog.Access{All: true}})
	if err != nil || res.Total != 1 {
		t.Errorf("image search after the migration: %v, %v; want the version put", res, err)
	}
	if err := s.PutImageMirrors(ctx, []apiv1.ImageMirror{{Source: "quay.io", Mirror: "localhost:5000/q"}}); err != nil {
		t.Errorf("PutImageMirrors after the migration: %v", err)
	}
}

// TestMigrateToOLMBundles opens a file of schema version 3, from before OLM
// bundle images, and checks that its OLM versions, and only they, lose their
// digest, so that the reconciliation at start finds them out of step and
// indexes them again, which builds their bundle images; and that an entry
// put with a bundle record reads back with it.
func TestMigrateToOLMBundles(t *testing.T) {
	ctx := context.Background()
	// With images, so that step 5 (images) keeps the digests.
	images := []pkgformat.Image{{Reference: "quay.io/org/x:1", Found: []string{"test"}}}
	s, got := migratedFrom(t, 3, pkgformat.Metadata{Name: "etcd", Format: pkgformat.OLM, Images: images},
		pkgformat.Metadata{Name: "kafka", Format: pkgformat.KUDO, Images: images})
	if got["etcd"] != "" || got["kafka"] != "sha256:kafka" {
		t.Errorf("digests after the migration %v; want etcd's empty, kafka's kept", got)
	}
	e := genEntries(1)[0]
	e.OLM = &olm.BundleRecord{Digest: "sha256:b", Size: 42, Name: "x.v1", Properties: []olm.Property{{Type: "olm.package", Value: json.RawMessage(`{"packageName":"x","version":"1"}`)},
		{Type: "olm.csv.metadata", Value: json.RawMessage(`{"annotations":{"categories":"Streaming & Messaging","olm.skipRange":">=0.7.3 <0.8.0"}}`)}}}
	if _, err := s.Put(ctx, e); err != nil {
		t.Fatal(err)
	}
	back, err := s.Entry(ctx, e.Namespace, e.Name, e.Tag)
	if err != nil {
		t.Fatal(err)
	}
	// Property values read back byte for byte, & < > unescaped, as opm writes them.
	if !reflect.DeepEqual(back.OLM, e.OLM) {
		t.Errorf("bundle record read back %+v, want %+v", back.OLM, e.OLM)
	}
}

// TestMigrateToSourceEvents opens a file of schema version 5, from before
// source events, whose feed holds a change: it reads back without a
// reason, and a source event is numbered after it.
func TestMigrateToSourceEvents(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	db, err := sql.Open("sqlite", sqlitedb.DSN(path, false, options))
	if err != nil {
		t.Fatal(err)
	}
	stmts := append(slices.Clone(migrations[:5]),
		`INSERT INTO changes (action, namespace, name, tag, digest, status, time) VALUES ('put', 'a', 'p', '1.0.0', 'sha256:a', 'indexed', 1000)`,
		`PRAGMA user_version = 5`)
	for _, stmt := range stmts {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	db.Close()
	s := openAt(t, path)
	defer s.Close()
	storetest.CheckMigratedFeed(t, s)
}

// TestMigrateToSummaries opens a file of schema version 7, from before
// version summaries and index versions: its version gets its summary from
// its metadata, and index version 1.
func TestMigrateToSummaries(t *testing.T) {
	s, _ := migratedFrom(t, 7, storetest.MigratedMetadata())
	storetest.CheckMigratedSummaries(t, s, "a", "etcd", "1.0.0")
}
