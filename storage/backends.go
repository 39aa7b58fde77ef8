package storage

import (
	"errors"
	"fmt"
	"os"
)

// Filesystem keeps blobs in a local directory.
type Filesystem struct {
	// RootDirectory defaults to <data>/registry.
	RootDirectory string `yaml:"rootDirectory"`
	// MaxThreads bounds concurrent filesystem operations (distribution's default when 0).
	MaxThreads int `yaml:"maxThreads"`
}

func (f *Filesystem) validate(prefix string) error {
	if err := required(prefix+".rootDirectory", f.RootDirectory); err != nil {
		return err
	}
	if f.MaxThreads != 0 && f.MaxThreads < 25 {
		return fmt.Errorf("%s.maxThreads: must be at least 25 (got %d)", prefix, f.MaxThreads)
	}
	return nil
}

func (f *Filesystem) parameters() (map[string]any, error) {
	p := map[string]any{"rootdirectory": f.RootDirectory}
	if f.MaxThreads > 0 {
		p["maxthreads"] = f.MaxThreads
	}
	return p, nil
}

// inmemory keeps blobs in process memory; everything is lost on exit. For tests.
type inmemory struct{}

func (inmemory) validate(string) error               { return nil }
func (inmemory) parameters() (map[string]any, error) { return map[string]any{}, nil }

// S3 keeps blobs in an S3-compatible object store.
type S3 struct {
	Bucket string `yaml:"bucket"`
	Region string `yaml:"region"`
	// RegionEndpoint is the URL of an S3-compatible server (MinIO, Ceph RGW, ...).
	RegionEndpoint string `yaml:"regionEndpoint"`
	RootDirectory  string `yaml:"rootDirectory"`
	AccessKey      string `yaml:"accessKey"`
	// SecretKeyFile holds the secret access key. Empty with AccessKey empty
	// means the AWS default credential chain.
	SecretKeyFile  string `yaml:"secretKeyFile"`
	ForcePathStyle bool   `yaml:"forcePathStyle"`
	// Insecure talks plain HTTP to the endpoint.
	Insecure     bool   `yaml:"insecure"`
	SkipVerify   bool   `yaml:"skipVerify"`
	Encrypt      bool   `yaml:"encrypt"`
	StorageClass string `yaml:"storageClass"`
	// ChunkSize is the multipart upload part size in bytes (distribution's default when 0).
	ChunkSize int64 `yaml:"chunkSize"`
}

func (s *S3) validate(prefix string) error {
	if err := required(prefix+".bucket", s.Bucket); err != nil {
		return err
	}
	if s.Region == "" && s.RegionEndpoint == "" {
		return fmt.Errorf("%s.region: required unless %s.regionEndpoint is set", prefix, prefix)
	}
	if (s.AccessKey == "") != (s.SecretKeyFile == "") {
		return fmt.Errorf("%s.secretKeyFile: accessKey and secretKeyFile go together", prefix)
	}
	if s.SecretKeyFile != "" {
		if _, err := os.Stat(s.SecretKeyFile); err != nil {
			return fmt.Errorf("%s.secretKeyFile: %w", prefix, err)
		}
	}
	if s.ChunkSize < 0 {
		return fmt.Errorf("%s.chunkSize: must not be negative", prefix)
	}
	return nil
}

func (s *S3) parameters() (map[string]any, error) {
	region := s.Region
	if region == "" {
		region = "us-east-1"
	}
	p := map[string]any{
		"bucket":         s.Bucket,
		"region":         region,
		"regionendpoint": s.RegionEndpoint,
		"rootdirectory":  s.RootDirectory,
		"forcepathstyle": s.ForcePathStyle,
		"secure":         !s.Insecure,
		"skipverify":     s.SkipVerify,
		"encrypt":        s.Encrypt,
	}
	if s.StorageClass != "" {
		p["storageclass"] = s.StorageClass
	}
	if s.ChunkSize > 0 {
		p["chunksize"] = s.ChunkSize
	}
	if s.AccessKey != "" {
		secret, err := readSecret("secretKeyFile", s.SecretKeyFile)
		if err != nil {
			return nil, err
		}
		p["accesskey"], p["secretkey"] = s.AccessKey, secret
	}
	return p, nil
}

// GCS keeps blobs in Google Cloud Storage.
type GCS struct {
	Bucket string `yaml:"bucket"`
	// KeyFile is a service account JSON key; empty means application default credentials.
	KeyFile       string `yaml:"keyFile"`
	RootDirectory string `yaml:"rootDirectory"`
	ChunkSize     int64  `yaml:"chunkSize"`
}

func (g *GCS) validate(prefix string) error {
	if err := required(prefix+".bucket", g.Bucket); err != nil {
		return err
	}
	if g.KeyFile != "" {
		if _, err := os.Stat(g.KeyFile); err != nil {
			return fmt.Errorf("%s.keyFile: %w", prefix, err)
		}
	}
	if g.ChunkSize < 0 {
		return fmt.Errorf("%s.chunkSize: must not be negative", prefix)
	}
	return nil
}

func (g *GCS) parameters() (map[string]any, error) {
	p := map[string]any{"bucket": g.Bucket, "rootdirectory": g.RootDirectory}
	if g.KeyFile != "" {
		p["keyfile"] = g.KeyFile
	}
	if g.ChunkSize > 0 {
		p["chunksize"] = g.ChunkSize
	}
	return p, nil
}

// Azure keeps blobs in Azure Blob Storage.
type Azure struct {
	AccountName string `yaml:"accountName"`
	// AccountKeyFile holds the shared account key; empty means the default Azure credential chain.
	AccountKeyFile string `yaml:"accountKeyFile"`
	Container      string `yaml:"container"`
	RootDirectory  string `yaml:"rootDirectory"`
	// ServiceURL overrides the blob endpoint (e.g. an Azurite emulator).
	ServiceURL string `yaml:"serviceURL"`
	Realm      string `yaml:"realm"`
}

func (a *Azure) validate(prefix string) error {
	if err := errors.Join(required(prefix+".accountName", a.AccountName), required(prefix+".container", a.Container)); err != nil {
		return err
	}
	if a.AccountKeyFile != "" {
		if _, err := os.Stat(a.AccountKeyFile); err != nil {
			return fmt.Errorf("%s.accountKeyFile: %w", prefix, err)
		}
	}
	return nil
}

func (a *Azure) parameters() (map[string]any, error) {
	p := map[string]any{
		"accountname":   a.AccountName,
		"container":     a.Container,
		"rootdirectory": a.RootDirectory,
		"realm":         a.Realm,
		"serviceurl":    a.ServiceURL,
	}
	if a.AccountKeyFile == "" {
		p["credentials"] = map[string]any{"type": "default_credentials"}
		return p, nil
	}
	key, err := readSecret("accountKeyFile", a.AccountKeyFile)
	if err != nil {
		return nil, err
	}
	p["accountkey"] = key
	p["credentials"] = map[string]any{"type": "shared_key"}
	return p, nil
}
