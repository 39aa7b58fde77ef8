package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/permissions"
)

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestZeroConfigIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	if c.Addr != ":5000" || c.Data != "./data" || c.Storage.Driver != "filesystem" {
		t.Errorf("defaults: addr %q data %q driver %q", c.Addr, c.Data, c.Storage.Driver)
	}
	if c.Storage.Filesystem.RootDirectory != filepath.Join("data", "registry") {
		t.Errorf("filesystem root %q, want under the data dir", c.Storage.Filesystem.RootDirectory)
	}
	if c.ShutdownTimeout != 30*time.Second {
		t.Errorf("shutdownTimeout %s", c.ShutdownTimeout)
	}
}

func TestLoadFileThenEnv(t *testing.T) {
	file := writeFile(t, `
addr: 127.0.0.1:6000
shutdownTimeout: 5s
log:
  level: debug
storage:
  driver: s3
  s3:
    bucket: packages
    regionEndpoint: http://127.0.0.1:9000
namespaces:
  - name: dev-*
    allowOverwrite: true
trust:
  policies:
    - repositories: ["stable/*"]
      keys: ["/etc/berth/keys/release.pub"]
      require: true
      requireSource: ["https://github.com/org/*", "http://127.0.0.1:*/allowed/*"]
`)
	c, err := Load(file, []string{
		"BERTH_LOG_LEVEL=warn",
		"BERTH_STORAGE_S3_BUCKET=other",
		"BERTH_STORAGE_S3_FORCEPATHSTYLE=true",
		"BERTH_SHUTDOWNTIMEOUT=1m",
		"UNRELATED=1",
	})
	if err != nil {
		t.Fatal(err)
	}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Addr != "127.0.0.1:6000" {
		t.Errorf("addr %q from file", c.Addr)
	}
	if c.Log.Level != "warn" || c.Storage.S3.Bucket != "other" || !c.Storage.S3.ForcePathStyle {
		t.Errorf("env did not override: level %q bucket %q forcePathStyle %v", c.Log.Level, c.Storage.S3.Bucket, c.Storage.S3.ForcePathStyle)
	}
	if c.ShutdownTimeout != time.Minute {
		t.Errorf("shutdownTimeout %s, want 1m from env", c.ShutdownTimeout)
	}
	want := []TrustPolicy{{Repositories: []string{"stable/*"}, Keys: []string{"/etc/berth/keys/release.pub"}, Require: true,
		RequireSource: []string{"https://github.com/org/*", "http://127.0.0.1:*/allowed/*"}}}
	if !reflect.DeepEqual(c.Trust.Policies, want) {
		t.Errorf("trust.policies = %+v, want %+v", c.Trust.Policies, want)
	}
	if !c.AllowOverwrite("dev-alice") || c.AllowOverwrite("stable") {
		t.Errorf("namespace policy: dev-alice %v stable %v", c.AllowOverwrite("dev-alice"), c.AllowOverwrite("stable"))
	}
}

// TestAuditRotationSettings: auth.auditMaxSize reads a size, and both
// rotation settings default when unset.
func TestAuditRotationSettings(t *testing.T) {
	for _, tc := range []struct {
		yaml  string
		size  ByteSize
		files int
	}{
		{"auth: {}\n", 100 << 20, 5},
		{"auth: {audit: stdout}\n", 100 << 20, 5},
		{"auth: {auditMaxSize: 10MiB, auditMaxFiles: 2}\n", 10 << 20, 2},
	} {
		c, err := Load(writeFile(t, tc.yaml), nil)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if c.Auth.AuditMaxSize != tc.size || c.Auth.AuditMaxFiles != tc.files {
			t.Errorf("%q: auditMaxSize %d, auditMaxFiles %d, want %d and %d", tc.yaml, c.Auth.AuditMaxSize, c.Auth.AuditMaxFiles, tc.size, tc.files)
		}
	}
}

func TestLoadErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{name: "unknown top-level key", yaml: "adress: :5000\n", want: `line 1: unknown key "adress"`},
		{name: "unknown nested key", yaml: "log:\n  colour: red\n", want: `line 2: unknown key "log.colour"`},
		{name: "unknown key in list item", yaml: "namespaces:\n  - name: dev\n    overwrite: true\n", want: `unknown key "namespaces[0].overwrite"`},
		{name: "wrong type", yaml: "shutdownTimeout: soon\n", want: "soon"},
		{name: "not yaml", yaml: "addr: [\n", want: "config"},
		{name: "bad env duration", env: []string{"BERTH_SHUTDOWNTIMEOUT=soon"}, want: "BERTH_SHUTDOWNTIMEOUT (shutdownTimeout): want a duration"},
		{name: "bad env bool", env: []string{"BERTH_STORAGE_DISABLEREDIRECT=maybe"}, want: "BERTH_STORAGE_DISABLEREDIRECT (storage.disableRedirect): want true or false"},
		{name: "bad env int", env: []string{"BERTH_STORAGE_FILESYSTEM_MAXTHREADS=many"}, want: "storage.filesystem.maxThreads): want an integer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := ""
			if tc.yaml != "" {
				file = writeFile(t, tc.yaml)
			}
			_, err := Load(file, tc.env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Load error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("error %v should name the missing file", err)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	for _, tc := range []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"addr without port", func(c *Config) { c.Addr = "localhost" }, "addr: want host:port"},
		{"log level", func(c *Config) { c.Log.Level = "loud" }, `log.level: want debug, info, warn or error (got "loud")`},
		{"log format", func(c *Config) { c.Log.Format = "xml" }, `log.format: want text or json (got "xml")`},
		{"negative shutdown", func(c *Config) { c.ShutdownTimeout = -time.Second }, "shutdownTimeout: must not be negative"},
		{"negative index timeout", func(c *Config) { c.Catalog.IndexTimeout = -time.Second }, "catalog.indexTimeout: must be positive (got -1s)"},
		{"catalog database other scheme", func(c *Config) { c.Catalog.Database = "mysql://u:pw@h/db" }, "catalog.database: want a SQLite file name or a postgres:// URL"},
		{"catalog database without host", func(c *Config) { c.Catalog.Database = "postgres:///berth" }, "catalog.database: the PostgreSQL URL names no host"},
		{"catalog database without database", func(c *Config) { c.Catalog.Database = "postgres://u:hunter2@db:5432/" }, "catalog.database: the PostgreSQL URL names no database"},
		{"catalog database unparsable", func(c *Config) { c.Catalog.Database = "postgresql://u:hunter2%zz@db/berth" }, "catalog.database: the PostgreSQL URL cannot be parsed"},
		{"catalog database sslmode", func(c *Config) { c.Catalog.Database = "postgres://u:hunter2@db/berth?sslmode=fancy" },
			`catalog.database: the PostgreSQL URL's sslmode "fancy" is none of disable, allow, prefer, require, verify-ca, verify-full`},
		{"catalog database sslmode in capitals", func(c *Config) { c.Catalog.Database = "postgres://u:hunter2@db/berth?sslmode=Require" },
			`catalog.database: the PostgreSQL URL's sslmode "Require" is none of`},
		{"catalog registry not a URL", func(c *Config) { c.Catalog.Registry = "localhost:5000" }, `catalog.registry: want http(s)://host[:port] (got "localhost:5000")`},
		{"catalog registry with a path", func(c *Config) { c.Catalog.Registry = "http://r/v2" }, `catalog.registry: want http(s)://host[:port]`},
		{"catalog public URL scheme", func(c *Config) { c.Catalog.PublicURL = "ftp://r" }, `catalog.publicURL: want http(s)://host[:port]`},
		{"tls key without certificate", func(c *Config) { c.HTTP.TLS.Key = "tls.key" }, "http.tls.certificate: required with http.tls.key"},
		{"tls certificate without key", func(c *Config) { c.HTTP.TLS.Certificate = "tls.crt" }, "http.tls.key: required with http.tls.certificate"},
		{"tls client CA without certificate", func(c *Config) { c.HTTP.TLS.ClientCA = "ca.crt" }, "http.tls.certificate: required with http.tls.clientCA"},
		{"tls min version", func(c *Config) {
			c.HTTP.TLS.Certificate, c.HTTP.TLS.Key, c.HTTP.TLS.MinVersion = "tls.crt", "tls.key", "1.1"
		},
			`http.tls.minVersion: want "1.2" or "1.3" (got "1.1")`},
		{"tls min version spelled", func(c *Config) {
			c.HTTP.TLS.Certificate, c.HTTP.TLS.Key, c.HTTP.TLS.MinVersion = "tls.crt", "tls.key", "TLS1.3"
		},
			`http.tls.minVersion: want "1.2" or "1.3" (got "TLS1.3")`},
		{"tls client auth", func(c *Config) {
			c.HTTP.TLS = TLS{Certificate: "tls.crt", Key: "tls.key", ClientCA: "ca.crt", ClientAuth: "required"}
		}, `http.tls.clientAuth: want verify-if-given or require (got "required")`},
		{"tls client auth without CA", func(c *Config) { c.HTTP.TLS = TLS{Certificate: "tls.crt", Key: "tls.key", ClientAuth: "require"} },
			"http.tls.clientCA: required with http.tls.clientAuth"},
		{"unknown driver", func(c *Config) { c.Storage.Driver = "floppy" }, `storage.driver: unknown driver "floppy" (want one of azure, filesystem, gcs, inmemory, s3)`},
		{"s3 without bucket", func(c *Config) { c.Storage.Driver = "s3" }, "storage.s3.bucket: required"},
		{"s3 without region", func(c *Config) { c.Storage.Driver = "s3"; c.Storage.S3.Bucket = "b" }, "storage.s3.region: required unless storage.s3.regionEndpoint is set"},
		{"s3 key without secret", func(c *Config) {
			c.Storage.Driver = "s3"
			c.Storage.S3.Bucket, c.Storage.S3.Region, c.Storage.S3.AccessKey = "b", "us-east-1", "AK"
		}, "storage.s3.secretKeyFile: accessKey and secretKeyFile go together"},
		{"s3 missing secret file", func(c *Config) {
			c.Storage.Driver = "s3"
			c.Storage.S3.Bucket, c.Storage.S3.Region, c.Storage.S3.AccessKey, c.Storage.S3.SecretKeyFile = "b", "us-east-1", "AK", "/nonexistent/secret"
		}, "storage.s3.secretKeyFile: stat /nonexistent/secret"},
		{"gcs without bucket", func(c *Config) { c.Storage.Driver = "gcs" }, "storage.gcs.bucket: required"},
		{"azure without account", func(c *Config) { c.Storage.Driver = "azure" }, "storage.azure.accountName: required"},
		{"filesystem threads", func(c *Config) { c.Storage.Filesystem.MaxThreads = 3 }, "storage.filesystem.maxThreads: must be at least 25"},
		{"namespace without name", func(c *Config) { c.Namespaces = []Namespace{{AllowOverwrite: true}} }, "namespaces[0].name: required"},
		{"namespace bad glob", func(c *Config) { c.Namespaces = []Namespace{{Name: "dev"}, {Name: "[x"}} }, "namespaces[1].name: bad glob"},
		{"namespace with slash", func(c *Config) { c.Namespaces = []Namespace{{Name: "a/b"}} }, `namespaces[0].name: a namespace has no '/'`},
		{"negative keepLast", func(c *Config) { c.Namespaces = []Namespace{{Name: "a", KeepLast: -1}} }, "namespaces[0].keepLast: must not be negative"},
		{"negative untaggedOlderThan", func(c *Config) { c.Namespaces = []Namespace{{Name: "a", UntaggedOlderThan: -time.Hour}} }, "namespaces[0].untaggedOlderThan: must not be negative"},
		{"unknown maxUnapprovedRating", func(c *Config) { c.Namespaces = []Namespace{{Name: "a"}, {Name: "b", MaxUnapprovedRating: "severe"}} }, `namespaces[1].maxUnapprovedRating: unknown permissions rating "severe": want one of none, low, medium, high, critical`},
		{"maxUnapprovedRating in capitals", func(c *Config) { c.Namespaces = []Namespace{{Name: "a", MaxUnapprovedRating: "High"}} }, `namespaces[0].maxUnapprovedRating: unknown permissions rating "High"`},
		{"maxUnapprovedRating blank", func(c *Config) { c.Namespaces = []Namespace{{Name: "a", MaxUnapprovedRating: " "}} }, `namespaces[0].maxUnapprovedRating: unknown permissions rating " "`},
		{"negative gc interval", func(c *Config) { c.GC.Interval = -time.Second }, "gc.interval: must not be negative"},
		{"trusted proxy not a CIDR", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/8", "ingress.local"} },
			`trustedProxies[1]: "ingress.local" is not a CIDR`},
		{"trusted proxy bad prefix", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/40"} }, `trustedProxies[0]: "10.0.0.0/40" is not a CIDR`},
		{"trusted proxy empty", func(c *Config) { c.TrustedProxies = []string{""} }, `trustedProxies[0]: "" is not a CIDR`},
		{"gc grace too short", func(c *Config) { c.GC.Grace = time.Second }, "gc.grace: must be at least 1m"},
		{"heartbeat too frequent", func(c *Config) { c.Replicas.HeartbeatInterval = time.Millisecond }, "replicas.heartbeatInterval: must be at least 100ms"},
		{"negative heartbeat", func(c *Config) { c.Replicas.HeartbeatInterval = -time.Second }, "replicas.heartbeatInterval: must be at least 100ms"},
		{"trust policy without repositories", func(c *Config) { c.Trust.Policies = []TrustPolicy{{Keys: []string{"k.pub"}}} }, "trust.policies[0].repositories: required"},
		{"trust policy bad glob", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"stable/[x"}, Keys: []string{"k.pub"}}}
		}, "trust.policies[0].repositories[0]: bad glob"},
		{"trust policy glob without slash", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"stable/*", "stable"}, Keys: []string{"k.pub"}}}
		}, `trust.policies[0].repositories[1]: want a glob over namespace/name, like "stable/*" (got "stable")`},
		{"trust policy image glob without host", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Images: []string{"quay.io/org/*", "org/*"}, Keys: []string{"k.pub"}}}
		}, `trust.policies[0].images[1]: want a glob over image repositories starting with their registry host, like "quay.io/org/*"`},
		{"trust policy image glob host alone", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Images: []string{"quay.io"}, Keys: []string{"k.pub"}}}
		}, `trust.policies[0].images[0]: want a glob over image repositories`},
		{"trust policy image glob host pattern", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Images: []string{"*.io/org/*"}, Keys: []string{"k.pub"}}}
		}, `trust.policies[0].images[0]: want a glob over image repositories`},
		{"trust policy image bad glob", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Images: []string{"quay.io/[x"}, Keys: []string{"k.pub"}}}
		}, `trust.policies[0].images[0]: bad glob "quay.io/[x"`},
		{"trust policy without keys", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}}, {Repositories: []string{"stable/*"}, Require: true}}
		}, "trust.policies[1].keys: at least one public key file is required"},
		{"trust policy empty key", func(c *Config) { c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{""}}} }, "trust.policies[0].keys[0]: empty file name"},
		{"trust policy empty log key", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, TLogKeys: []string{""}}}
		}, "trust.policies[0].tlogKeys[0]: empty file name"},
		{"trust policy source glob without scheme", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, RequireSource: []string{"https://github.com/org/*", "github.com/org/*"}}}
		}, `trust.policies[0].requireSource[1]: want a glob over source URLs with their scheme and host, like "https://github.com/org/*" (got "github.com/org/*")`},
		{"trust policy source glob bad scheme", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, RequireSource: []string{"*://github.com/org/*"}}}
		}, `trust.policies[0].requireSource[0]: want a glob over source URLs`},
		{"trust policy source glob git+", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, RequireSource: []string{"git+https://github.com/org/*"}}}
		}, `trust.policies[0].requireSource[0]: want a glob over source URLs with their scheme and host, like "https://github.com/org/*": sources are matched without the "git+" prefix`},
		{"trust policy source glob without host", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, RequireSource: []string{"file:///srv/*"}}}
		}, `trust.policies[0].requireSource[0]: want a glob over source URLs with their scheme and host, like "https://github.com/org/*": no host`},
		{"trust policy source bad glob", func(c *Config) {
			c.Trust.Policies = []TrustPolicy{{Repositories: []string{"a/*"}, Keys: []string{"k.pub"}, RequireSource: []string{"https://github.com/[x"}}}
		}, `trust.policies[0].requireSource[0]: bad glob "https://github.com/[x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.modify(c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want error containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("Validate() = %v: the error quotes a password", err)
			}
		})
	}
}

func TestEnvNamesCoverEveryScalar(t *testing.T) {
	names := strings.Join(EnvNames(), " ")
	for _, want := range []string{"BERTH_ADDR", "BERTH_DATA", "BERTH_LOG_LEVEL", "BERTH_STORAGE_DRIVER", "BERTH_STORAGE_S3_REGIONENDPOINT", "BERTH_REGISTRY_HTTPSECRETFILE"} {
		if !strings.Contains(names, want) {
			t.Errorf("EnvNames lacks %s", want)
		}
	}
}

func TestCatalogPostgres(t *testing.T) {
	for db, want := range map[string]bool{
		"./data/catalog.db":                       false,
		"/var/lib/berth/postgres.db":              false,
		"postgres://berth@db:5432/berth":          true,
		"postgresql://u:p@10.0.0.1/b?sslmode=":    true,
		"postgres://u:p@db/b?sslmode=verify-full": true,
	} {
		c := Catalog{Database: db}
		if c.Postgres() != want {
			t.Errorf("Catalog{Database: %q}.Postgres() = %v, want %v", db, !want, want)
		}
		cfg := Default()
		cfg.Catalog.Database = db
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(catalog.database %q) = %v", db, err)
		}
	}
}

// TestDatabaseForLog: what berth logs of catalog.database masks the
// password, wherever the URL carries it.
func TestDatabaseForLog(t *testing.T) {
	for db, want := range map[string]string{
		"./data/catalog.db": "./data/catalog.db",
		"postgres://berth:hunter2@db:5432/berth?sslmode=disable":     "postgres://berth:xxxxx@db:5432/berth?sslmode=disable",
		"postgresql://berth@db/berth":                                "postgresql://berth@db/berth",
		"postgres://berth@db/berth?password=hunter2&sslmode=require": "postgres://berth@db/berth?password=xxxxx&sslmode=require",
		"postgres://berth:hunter2%zz@db/berth":                       "(a PostgreSQL URL that cannot be parsed)",
	} {
		c := Catalog{Database: db}
		if got := c.DatabaseForLog(); got != want || strings.Contains(got, "hunter2") {
			t.Errorf("DatabaseForLog(%q) = %q, want %q", db, got, want)
		}
	}
}

func TestMaxUnapproved(t *testing.T) {
	for _, tc := range []struct {
		set  string
		want permissions.Rating
	}{{"", permissions.DefaultMaxUnapproved}, {"none", permissions.None}, {"critical", permissions.Critical}} {
		if got, err := (Namespace{Name: "a", MaxUnapprovedRating: tc.set}).MaxUnapproved(); got != tc.want || err != nil {
			t.Errorf("MaxUnapproved of %q = %s, %v; want %s", tc.set, got, err, tc.want)
		}
	}
}

func TestTLSDefaultsAndValidCombinations(t *testing.T) {
	for _, tls := range []TLS{
		{},
		{Certificate: "tls.crt", Key: "tls.key"},
		{Certificate: "tls.crt", Key: "tls.key", MinVersion: "1.3"},
		{Certificate: "tls.crt", Key: "tls.key", ClientCA: "ca.crt"},
		{Certificate: "tls.crt", Key: "tls.key", ClientCA: "ca.crt", ClientAuth: "require"},
	} {
		c := &Config{HTTP: HTTP{TLS: tls}}
		c.SetDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("%+v: Validate() = %v", tls, err)
		}
		if c.HTTP.TLS.MinVersion == "" {
			t.Errorf("%+v: minVersion has no default", tls)
		}
		if tls.ClientCA != "" && tls.ClientAuth == "" && c.HTTP.TLS.ClientAuth != ClientAuthIfGiven {
			t.Errorf("%+v: clientAuth defaults to %q, want %q", tls, c.HTTP.TLS.ClientAuth, ClientAuthIfGiven)
		}
	}
}
