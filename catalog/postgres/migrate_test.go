package postgres

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/storetest"
	"github.com/berth-registry/berth/internal/pgtest"
	"github.com/berth-registry/berth/pkgformat"
)

// TestMigrateToImages opens a database of schema version 1, from before
// images, and checks that its versions without images in their metadata,
// and only they, lose their digest, so that the reconciliation at start
// indexes them again and derives their images.
func TestMigrateToImages(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(name string, images []pkgformat.Image) {
		t.Helper()
		md, err := json.Marshal(pkgformat.Metadata{SchemaVersion: pkgformat.MetadataSchemaVersion, Name: name, Version: "1.0.0", Format: pkgformat.Helm, Images: images})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO entries (namespace, name, tag, version_key, digest, status, reason, indexed, verified,
		kube_min, kube_max, content_digest, content_size, content_media_type, metadata)
		VALUES ('a', $1, '1.0.0', $2, $3, 'indexed', '', 1000, false, '', '', 'sha256:c', 10, 'application/x-tar', $4)`,
			name, catalog.VersionKey("1.0.0"), "sha256:"+name, string(md)); err != nil {
			t.Fatal(err)
		}
	}
	for _, stmt := range []string{`CREATE TABLE schema_version (version integer NOT NULL)`, `INSERT INTO schema_version VALUES (1)`, migrations[0]} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	insert("old", nil)
	insert("derived", []pkgformat.Image{{Reference: "quay.io/org/x:1", Found: []string{"test"}}})
	conn.Close(ctx)

	s := openAt(t, dsn, Options{})
	defer s.Close()
	tags, err := s.Tags(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, td := range tags {
		got[td.Name] = td.Digest
	}
	if got["old"] != "" || got["derived"] != "sha256:derived" {
		t.Errorf("digests after the migration %v; want old's empty, derived's kept", got)
	}
}

// TestMigrateToSourceEvents opens a database of schema version 2, from
// before source events, whose feed holds a change: it reads back without a
// reason, and a source event is numbered after it.
func TestMigrateToSourceEvents(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`CREATE TABLE schema_version (version integer NOT NULL)`, `INSERT INTO schema_version VALUES (2)`,
		migrations[0], migrations[1],
		`INSERT INTO changes (seq, action, namespace, name, tag, digest, status, time) VALUES (1, 'put', 'a', 'p', '1.0.0', 'sha256:a', 'indexed', 1000)`,
		`UPDATE counters SET seq = 1`} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	conn.Close(ctx)

	s := openAt(t, dsn, Options{})
	defer s.Close()
	storetest.CheckMigratedFeed(t, s)
}

// TestMigrateToSummaries opens a database of schema version 4, from before
// version summaries and index versions: its version gets its summary from
// its metadata, and index version 1.
func TestMigrateToSummaries(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.Database(t)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	md, err := json.Marshal(storetest.MigratedMetadata())
	if err != nil {
		t.Fatal(err)
	}
	stmts := append([]string{`CREATE TABLE schema_version (version integer NOT NULL)`, `INSERT INTO schema_version VALUES (4)`}, migrations[:4]...)
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%.60s: %v", stmt, err)
		}
	}
	if _, err := conn.Exec(ctx, `INSERT INTO entries (namespace, name, tag, version_key, digest, status, reason, indexed, verified,
	kube_min, kube_max, content_digest, content_size, content_media_type, metadata)
	VALUES ('a', 'etcd', '1.0.0', $1, 'sha256:etcd', 'indexed', '', 1000, false, '', '', 'sha256:c', 10, 'application/x-tar', $2)`,
		catalog.VersionKey("1.0.0"), string(md)); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	s := openAt(t, dsn, Options{})
	defer s.Close()
	storetest.CheckMigratedSummaries(t, s, "a", "etcd", "1.0.0")
}
