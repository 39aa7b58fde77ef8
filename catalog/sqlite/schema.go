package sqlite

// migrations are the schema, one step per version: migrations[i] takes a file
// from PRAGMA user_version i to i+1. Steps are only ever appended; a released
// step never changes, so that every file can be brought up to date.
var migrations = []string{
	// 1: entries, the channel and API rows of indexed entries, one summary
	// row and one full-text document per package, and the change feed.
	`
CREATE TABLE entries (
	id                 INTEGER PRIMARY KEY,
	namespace          TEXT NOT NULL,
	name               TEXT NOT NULL,
	tag                TEXT NOT NULL,
	version_key        TEXT NOT NULL,
	digest             TEXT NOT NULL,
	status             TEXT NOT NULL,
	reason             TEXT NOT NULL,
	indexed            INTEGER NOT NULL,
	verified           INTEGER NOT NULL,
	kube_min           TEXT NOT NULL,
	kube_max           TEXT NOT NULL,
	content_digest     TEXT NOT NULL,
	content_size       INTEGER NOT NULL,
	content_media_type TEXT NOT NULL,
	metadata           TEXT,
	files              TEXT,
	UNIQUE (namespace, name, tag)
);
CREATE INDEX entries_status ON entries (status, namespace, name, tag);
CREATE INDEX entries_latest ON entries (namespace, name, status, version_key);

CREATE TABLE entry_channels (
	entry_id  INTEGER NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	namespace TEXT NOT NULL,
	name      TEXT NOT NULL,
	channel   TEXT NOT NULL,
	PRIMARY KEY (entry_id, channel)
) WITHOUT ROWID;
CREATE INDEX entry_channels_channel ON entry_channels (channel, namespace, name);

CREATE TABLE entry_apis (
	entry_id  INTEGER NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	namespace TEXT NOT NULL,
	name      TEXT NOT NULL,
	api_group TEXT NOT NULL,
	kind      TEXT NOT NULL
);
CREATE INDEX entry_apis_entry ON entry_apis (entry_id);
CREATE INDEX entry_apis_kind ON entry_apis (kind, api_group, namespace, name);
CREATE INDEX entry_apis_group ON entry_apis (api_group, namespace, name);

CREATE TABLE packages (
	id           INTEGER PRIMARY KEY,
	namespace    TEXT NOT NULL,
	name         TEXT NOT NULL,
	name_lower   TEXT NOT NULL,
	version      TEXT NOT NULL,
	digest       TEXT NOT NULL,
	format       TEXT NOT NULL,
	display_name TEXT NOT NULL,
	description  TEXT NOT NULL,
	app_version  TEXT NOT NULL,
	keywords     TEXT NOT NULL,
	channels     TEXT NOT NULL,
	created      INTEGER,
	updated      INTEGER NOT NULL,
	verified     INTEGER NOT NULL,
	UNIQUE (namespace, name)
);
CREATE INDEX packages_name ON packages (name, namespace);
CREATE INDEX packages_name_lower ON packages (name_lower);
CREATE INDEX packages_updated ON packages (updated DESC, name, namespace);
CREATE INDEX packages_facets ON packages (format, namespace);

CREATE VIRTUAL TABLE packages_fts USING fts5 (
	name, display_name, description, keywords, maintainers, apis,
	tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3 4 5 6 7 8'
);

CREATE TABLE changes (
	seq       INTEGER PRIMARY KEY AUTOINCREMENT,
	action    TEXT NOT NULL,
	namespace TEXT NOT NULL,
	name      TEXT NOT NULL,
	tag       TEXT NOT NULL,
	digest    TEXT NOT NULL,
	status    TEXT NOT NULL,
	time      INTEGER NOT NULL
);
`,
	// 2: search moves to an in-memory index (catalog/searchindex) built
	// from the packages table alone: each row gains the full text FTS5 held
	// (maintainer names, provided kinds and groups of the latest version)
	// and what the filters need over all indexed versions (channels,
	// provided APIs, Kubernetes ranges, as JSON arrays, set as
	// setPackageSets does); the FTS5 table and the indexes only SQL search
	// used go.
	`
ALTER TABLE packages ADD COLUMN maintainers TEXT NOT NULL DEFAULT '';
ALTER TABLE packages ADD COLUMN apis TEXT NOT NULL DEFAULT '';
ALTER TABLE packages ADD COLUMN all_channels TEXT NOT NULL DEFAULT '[]';
ALTER TABLE packages ADD COLUMN all_apis TEXT NOT NULL DEFAULT '[]';
ALTER TABLE packages ADD COLUMN kube_ranges TEXT NOT NULL DEFAULT '[]';
UPDATE packages SET
	maintainers = coalesce((SELECT f.maintainers FROM packages_fts f WHERE f.rowid = packages.id), ''),
	apis = coalesce((SELECT f.apis FROM packages_fts f WHERE f.rowid = packages.id), ''),
	all_channels = (SELECT json_group_array(channel) FROM (SELECT DISTINCT c.channel FROM entries e
		JOIN entry_channels c ON c.entry_id = e.id
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1)),
	all_apis = (SELECT json_group_array(json_array(api_group, kind)) FROM (SELECT DISTINCT a.api_group, a.kind FROM entries e
		JOIN entry_apis a ON a.entry_id = e.id
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1, 2)),
	kube_ranges = (SELECT json_group_array(json_array(kube_min, kube_max)) FROM (SELECT DISTINCT kube_min, kube_max FROM entries e
		WHERE e.namespace = packages.namespace AND e.name = packages.name AND e.status = 'indexed' ORDER BY 1, 2));
DROP TABLE packages_fts;
DROP INDEX packages_name;
DROP INDEX packages_name_lower;
DROP INDEX packages_updated;
DROP INDEX packages_facets;
ALTER TABLE packages DROP COLUMN name_lower;
DROP INDEX entry_channels_channel;
DROP INDEX entry_apis_kind;
DROP INDEX entry_apis_group;
`,
	// 3: provenance. signature_checks holds the last check of the
	// signatures of each digest that indexed versions of a package hold:
	// when, under which trust policy (its fingerprint), the verdict, and
	// why it could not be made if it could not; signatures holds what that
	// check found, one row per signature or attestation, in the check's
	// order (subject is the version digest, digest the manifest that
	// carries it). A check and its rows go when no indexed version holds
	// its digest. entries_digest finds the versions of a digest.
	`
CREATE TABLE signature_checks (
	namespace TEXT NOT NULL,
	name      TEXT NOT NULL,
	digest    TEXT NOT NULL,
	checked   INTEGER NOT NULL,
	policy    TEXT NOT NULL,
	verified  INTEGER NOT NULL,
	error     TEXT NOT NULL,
	PRIMARY KEY (namespace, name, digest)
) WITHOUT ROWID;

CREATE TABLE signatures (
	namespace      TEXT NOT NULL,
	name           TEXT NOT NULL,
	subject        TEXT NOT NULL,
	position       INTEGER NOT NULL,
	digest         TEXT NOT NULL,
	layer          TEXT NOT NULL,
	kind           TEXT NOT NULL,
	predicate_type TEXT NOT NULL,
	key_id         TEXT NOT NULL,
	verified       INTEGER NOT NULL,
	reason         TEXT NOT NULL,
	PRIMARY KEY (namespace, name, subject, position),
	FOREIGN KEY (namespace, name, subject) REFERENCES signature_checks (namespace, name, digest) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX signatures_digest ON signatures (namespace, name, digest);
CREATE INDEX entries_digest ON entries (namespace, name, digest);
`,
	// 4: OLM bundle images. olm holds, for an indexed OLM version, the
	// record of the registry+v1 bundle image berth generated for it
	// (olm.BundleRecord, JSON). The OLM versions indexed before it get an
	// empty digest, so that the reconciliation at start finds them out of
	// step with the registry and indexes them again, which builds their
	// bundle images.
	`
ALTER TABLE entries ADD COLUMN olm TEXT;
UPDATE entries SET digest = '' WHERE status = 'indexed' AND json_extract(metadata, '$.format') = 'olm';
`,
	// 5: images. entry_images holds the images of indexed entries
	// (pkgformat.Metadata.Images that parse), split as catalog.ImageRef,
	// and all_images their distinct set over a package's indexed versions
	// ([repository, tag, digest] arrays), for the image search filter;
	// image_mirrors holds where the images of source repositories live at
	// this site. The versions indexed before it have no images in their
	// metadata: they get an empty digest, as in step 4, so that the
	// reconciliation at start indexes them again and derives their images.
	`
CREATE TABLE entry_images (
	entry_id   INTEGER NOT NULL REFERENCES entries (id) ON DELETE CASCADE,
	repository TEXT NOT NULL,
	tag        TEXT NOT NULL,
	digest     TEXT NOT NULL
);
CREATE INDEX entry_images_entry ON entry_images (entry_id);
ALTER TABLE packages ADD COLUMN all_images TEXT NOT NULL DEFAULT '[]';

CREATE TABLE image_mirrors (
	source TEXT PRIMARY KEY,
	mirror TEXT NOT NULL
) WITHOUT ROWID;
UPDATE entries SET digest = '' WHERE status = 'indexed' AND json_extract(metadata, '$.images') IS NULL;
`,
	// 6: events of tracked sources in the change feed (action "source"):
	// reason says why a source failed.
	`
ALTER TABLE changes ADD COLUMN reason TEXT NOT NULL DEFAULT '';
`,
	// 7: provenance sources. signatures.sources holds the sources a
	// verified SLSA provenance attestation names (a JSON array; '' for
	// none), which a trust policy's requireSource checks. The checks made
	// before it are made again: their policy is emptied.
	`
ALTER TABLE signatures ADD COLUMN sources TEXT NOT NULL DEFAULT '';
UPDATE signature_checks SET policy = '';
`,
	// 8: version summaries and index versions. entries.summary holds
	// the part of an indexed version's metadata that describing its
	// package needs (catalog.Summary, JSON), so that a package's page reads
	// its versions without decoding their whole metadata; examples the
	// alm-examples of an OLM version's CSV (JSON, NULL for none); and
	// index_version the catalog.IndexVersion the version was read with.
	// The versions stored before it get their summaries from their
	// metadata and index version 1, and the background re-index
	// (catalog/reindex.go) reads them again; entries_stale counts them
	// (Stats, which /readyz runs) from the index alone: a partial index of
	// index_version is not used for a count with a bound version, and
	// reading 100,000 rows to count them took a second.
	`
ALTER TABLE entries ADD COLUMN summary TEXT;
ALTER TABLE entries ADD COLUMN examples TEXT;
ALTER TABLE entries ADD COLUMN index_version INTEGER NOT NULL DEFAULT 1;
UPDATE entries SET summary = json_object(
	'format', metadata -> '$.format', 'appVersion', metadata -> '$.appVersion', 'csvName', metadata -> '$.csvName',
	'displayName', metadata -> '$.displayName', 'description', metadata -> '$.description',
	'maintainers', metadata -> '$.maintainers', 'channels', metadata -> '$.channels',
	'defaultChannel', metadata -> '$.defaultChannel', 'permissions', metadata -> '$.permissions',
	'created', metadata -> '$.created')
WHERE metadata IS NOT NULL;
CREATE INDEX entries_stale ON entries (status, index_version);
`,
}
