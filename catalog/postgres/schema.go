package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema, one step per version: migrations[i] takes a
// database from schema_version i to i+1. Steps are only ever appended; a
// released step never changes.
//
// The tables are SQLite's (catalog/sqlite), with these differences: text that
// is ordered or compared sorts by bytes (COLLATE "C"), as in SQLite; a
// package's search document is stored whole as JSON with the revision that
// wrote it, and a deleted package keeps its row with no document, so that
// other replicas see the deletion (follow.go); and counters holds the last
// revision and change sequence number handed out, whose row lock orders
// commits (write.go).
var migrations = []string{
	`
CREATE TABLE entries (
	id                 bigserial PRIMARY KEY,
	namespace          text COLLATE "C" NOT NULL,
	name               text COLLATE "C" NOT NULL,
	tag                text COLLATE "C" NOT NULL,
	version_key        text COLLATE "C" NOT NULL,
	digest             text COLLATE "C" NOT NULL,
	status             text NOT NULL,
	reason             text NOT NULL,
	indexed            bigint NOT NULL,
	verified           boolean NOT NULL,
	kube_min           text COLLATE "C" NOT NULL,
	kube_max           text COLLATE "C" NOT NULL,
	content_digest     text NOT NULL,
	content_size       bigint NOT NULL,
	content_media_type text NOT NULL,
	metadata           text,
	files              text,
	olm                text,
	UNIQUE (namespace, name, tag)
);
CREATE INDEX entries_status ON entries (status, namespace, name, tag);
CREATE INDEX entries_latest ON entries (namespace, name, status, version_key);
CREATE INDEX entries_digest ON entries (namespace, name, digest);

CREATE TABLE entry_channels (
	entry_id bigint NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	channel  text COLLATE "C" NOT NULL,
	PRIMARY KEY (entry_id, channel)
);

CREATE TABLE entry_apis (
	entry_id  bigint NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	api_group text COLLATE "C" NOT NULL,
	kind      text COLLATE "C" NOT NULL
);
CREATE INDEX entry_apis_entry ON entry_apis (entry_id);

CREATE TABLE packages (
	namespace text COLLATE "C" NOT NULL,
	name      text COLLATE "C" NOT NULL,
	rev       bigint NOT NULL,
	doc       text,
	PRIMARY KEY (namespace, name)
);
CREATE INDEX packages_rev ON packages (rev);

CREATE TABLE signature_checks (
	namespace text COLLATE "C" NOT NULL,
	name      text COLLATE "C" NOT NULL,
	digest    text COLLATE "C" NOT NULL,
	checked   bigint NOT NULL,
	policy    text NOT NULL,
	verified  boolean NOT NULL,
	error     text NOT NULL,
	PRIMARY KEY (namespace, name, digest)
);

CREATE TABLE signatures (
	namespace      text COLLATE "C" NOT NULL,
	name           text COLLATE "C" NOT NULL,
	subject        text COLLATE "C" NOT NULL,
	position       integer NOT NULL,
	digest         text COLLATE "C" NOT NULL,
	layer          text NOT NULL,
	kind           text NOT NULL,
	predicate_type text NOT NULL,
	key_id         text NOT NULL,
	verified       boolean NOT NULL,
	reason         text NOT NULL,
	PRIMARY KEY (namespace, name, subject, position),
	FOREIGN KEY (namespace, name, subject) REFERENCES signature_checks (namespace, name, digest) ON DELETE CASCADE
);
CREATE INDEX signatures_digest ON signatures (namespace, name, digest);

CREATE TABLE changes (
	seq       bigint PRIMARY KEY,
	action    text NOT NULL,
	namespace text NOT NULL,
	name      text NOT NULL,
	tag       text NOT NULL,
	digest    text NOT NULL,
	status    text NOT NULL,
	time      bigint NOT NULL
);

CREATE TABLE counters (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	rev bigint NOT NULL,
	seq bigint NOT NULL
);
INSERT INTO counters (rev, seq) VALUES (0, 0);
`,
	// 2: images, as SQLite's step 5: the images of indexed entries, split,
	// for the image search filter, and the image mirrors of the site; the
	// versions indexed before it are indexed again at start.
	`
CREATE TABLE entry_images (
	entry_id   bigint NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	repository text COLLATE "C" NOT NULL,
	tag        text COLLATE "C" NOT NULL,
	digest     text COLLATE "C" NOT NULL
);
CREATE INDEX entry_images_entry ON entry_images (entry_id);

CREATE TABLE image_mirrors (
	source text COLLATE "C" PRIMARY KEY,
	mirror text NOT NULL
);
UPDATE entries SET digest = '' WHERE status = 'indexed' AND (metadata::jsonb -> 'images') IS NULL;
`,
	// 3: events of tracked sources in the change feed, as SQLite's step 6.
	`
ALTER TABLE changes ADD COLUMN reason text NOT NULL DEFAULT '';
`,
	// 4: provenance sources, as SQLite's step 7: the sources a verified
	// SLSA provenance attestation names, for requireSource; the checks
	// made before it are made again.
	`
ALTER TABLE signatures ADD COLUMN sources text NOT NULL DEFAULT '';
UPDATE signature_checks SET policy = '';
`,
	// 5: version summaries and index versions, as SQLite's step 8: the
	// part of an indexed version's metadata its package's description
	// needs (catalog.Summary), the alm-examples of an OLM version's CSV,
	// and the catalog.IndexVersion it was read with. The versions stored
	// before it get their summaries from their metadata and index
	// version 1, and the background re-index reads them again.
	`
ALTER TABLE entries ADD COLUMN summary text;
ALTER TABLE entries ADD COLUMN examples text;
ALTER TABLE entries ADD COLUMN index_version integer NOT NULL DEFAULT 1;
UPDATE entries SET summary = (SELECT jsonb_build_object(
	'format', m -> 'format', 'appVersion', m -> 'appVersion', 'csvName', m -> 'csvName',
	'displayName', m -> 'displayName', 'description', m -> 'description',
	'maintainers', m -> 'maintainers', 'channels', m -> 'channels',
	'defaultChannel', m -> 'defaultChannel', 'permissions', m -> 'permissions',
	'created', m -> 'created')::text FROM (SELECT metadata::jsonb AS m) AS x)
WHERE metadata IS NOT NULL;
CREATE INDEX entries_stale ON entries (index_version) WHERE status = 'indexed';
`,
}

// migrate brings the database's schema up to date in one transaction, under
// an advisory lock, so that replicas starting together migrate it once. It
// refuses a database a newer berth migrated.
func migrate(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, 0)`, lockClass); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL)`); err != nil {
		return err
	}
	var version int
	err := tx.QueryRow(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case err == pgx.ErrNoRows:
		if _, err := tx.Exec(ctx, `INSERT INTO schema_version VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this berth's %d: it was written by a newer berth", version, len(migrations))
	}
	for i := version; i < len(migrations); i++ {
		if _, err := tx.Exec(ctx, migrations[i]); err != nil {
			return fmt.Errorf("schema step %d: %w", i+1, err)
		}
	}
	_, err = tx.Exec(ctx, `UPDATE schema_version SET version = $1`, len(migrations))
	return err
}
