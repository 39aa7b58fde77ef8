package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestDistributionParameters(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		cfg      Config
		wantName string
		want     map[string]any
	}{
		{"filesystem", Config{Driver: "filesystem", Filesystem: Filesystem{RootDirectory: "/srv/berth", MaxThreads: 50}},
			"filesystem", map[string]any{"rootdirectory": "/srv/berth", "maxthreads": 50}},
		{"s3 with key from file", Config{Driver: "s3", S3: S3{Bucket: "b", RegionEndpoint: "http://127.0.0.1:9000", AccessKey: "AK", SecretKeyFile: secret, Insecure: true}},
			"s3aws", map[string]any{"bucket": "b", "region": "us-east-1", "regionendpoint": "http://127.0.0.1:9000", "accesskey": "AK", "secretkey": "s3cr3t", "secure": false}},
		{"gcs", Config{Driver: "gcs", GCS: GCS{Bucket: "b", RootDirectory: "/r"}},
			"gcs", map[string]any{"bucket": "b", "rootdirectory": "/r"}},
		{"azure with key from file", Config{Driver: "azure", Azure: Azure{AccountName: "acct", Container: "c", AccountKeyFile: secret}},
			"azure", map[string]any{"accountname": "acct", "container": "c", "accountkey": "s3cr3t"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate("storage"); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			name, params, err := tc.cfg.Distribution()
			if err != nil {
				t.Fatal(err)
			}
			if name != tc.wantName {
				t.Errorf("driver %q, want %q", name, tc.wantName)
			}
			for k, v := range tc.want {
				if params[k] != v {
					t.Errorf("parameter %s = %v, want %v", k, params[k], v)
				}
			}
		})
	}
}

func TestDistributionReadsSecretAtUse(t *testing.T) {
	c := Config{Driver: "s3", S3: S3{Bucket: "b", Region: "us-east-1", AccessKey: "AK", SecretKeyFile: filepath.Join(t.TempDir(), "gone")}}
	if _, _, err := c.Distribution(); err == nil {
		t.Fatal("want an error for a missing secret file")
	}
}

func TestOpenAndCheck(t *testing.T) {
	ctx := context.Background()
	c := Config{}
	c.SetDefaults(t.TempDir())
	d, err := Open(ctx, &c)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh root that does not exist yet is reachable storage.
	if err := Check(ctx, d, time.Second); err != nil {
		t.Fatalf("fresh filesystem storage not ready: %v", err)
	}
	if err := d.PutContent(ctx, "/probe", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, d, time.Second); err != nil {
		t.Fatalf("written filesystem storage not ready: %v", err)
	}
}

func TestCheckReportsUnreachableStorage(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "file-not-dir")
	if err := os.WriteFile(root, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Driver: "filesystem", Filesystem: Filesystem{RootDirectory: filepath.Join(root, "sub")}}
	d, err := Open(ctx, &c)
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(ctx, d, time.Second); err == nil {
		t.Fatal("storage under a regular file should not be ready")
	}
}
