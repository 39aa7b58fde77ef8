// Package storage chooses and configures berth's blob storage: one of
// distribution's storage drivers, selected by name, each configured by a typed
// struct instead of distribution's untyped parameter map.
//
// A backend joins by adding itself to the backends table; the driver itself
// registers with distribution's factory when its package is imported here.
package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	storagedriver "github.com/distribution/distribution/v3/registry/storage/driver"
	"github.com/distribution/distribution/v3/registry/storage/driver/factory"

	// Drivers register themselves with distribution's factory by name.
	_ "github.com/distribution/distribution/v3/registry/storage/driver/azure"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/filesystem"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/gcs"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/inmemory"
	_ "github.com/distribution/distribution/v3/registry/storage/driver/s3-aws"
)

// Config selects a storage driver by name and holds the typed settings of each.
// Only the section named by Driver is used.
type Config struct {
	// Driver is the distribution driver name: filesystem (default), inmemory, s3, gcs or azure.
	Driver     string     `yaml:"driver"`
	Filesystem Filesystem `yaml:"filesystem"`
	S3         S3         `yaml:"s3"`
	GCS        GCS        `yaml:"gcs"`
	Azure      Azure      `yaml:"azure"`
	// DisableRedirect serves blobs through berth instead of redirecting
	// clients to the object store's own URLs (s3, gcs, azure).
	DisableRedirect bool `yaml:"disableRedirect"`
}

// backend is the typed configuration of one driver.
type backend interface {
	// validate reports the first bad setting, naming its key under prefix.
	validate(prefix string) error
	// parameters renders the settings as distribution's driver parameters,
	// reading secrets from the files they are kept in.
	parameters() (map[string]any, error)
}

// backends maps a driver name to its section of the configuration.
func (c *Config) backends() map[string]backend {
	return map[string]backend{
		"filesystem": &c.Filesystem,
		"inmemory":   inmemory{},
		"s3":         &c.S3,
		"gcs":        &c.GCS,
		"azure":      &c.Azure,
	}
}

// distributionName maps berth's driver names to distribution's factory names.
var distributionName = map[string]string{"s3": "s3aws"}

// Drivers lists the driver names Config accepts.
func (c *Config) Drivers() []string {
	names := make([]string, 0, 5)
	for name := range c.backends() {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// SetDefaults fills unset settings; dataDir is berth's data directory.
func (c *Config) SetDefaults(dataDir string) {
	if c.Driver == "" {
		c.Driver = "filesystem"
	}
	if c.Filesystem.RootDirectory == "" {
		c.Filesystem.RootDirectory = filepath.Join(dataDir, "registry")
	}
}

// Validate reports the first bad setting, naming its key under prefix (e.g. "storage").
func (c *Config) Validate(prefix string) error {
	b, ok := c.backends()[c.Driver]
	if !ok {
		return fmt.Errorf("%s.driver: unknown driver %q (want one of %s)", prefix, c.Driver, strings.Join(c.Drivers(), ", "))
	}
	return b.validate(prefix + "." + c.Driver)
}

// Distribution returns the distribution driver name and parameters for c, as
// distribution's configuration.Storage expects them.
func (c *Config) Distribution() (string, map[string]any, error) {
	b, ok := c.backends()[c.Driver]
	if !ok {
		return "", nil, fmt.Errorf("storage.driver: unknown driver %q", c.Driver)
	}
	params, err := b.parameters()
	if err != nil {
		return "", nil, fmt.Errorf("storage.%s: %w", c.Driver, err)
	}
	name := c.Driver
	if n, ok := distributionName[name]; ok {
		name = n
	}
	return name, params, nil
}

// Open creates the configured driver directly, for tools that need storage
// without a registry in front of it.
func Open(ctx context.Context, c *Config) (storagedriver.StorageDriver, error) {
	name, params, err := c.Distribution()
	if err != nil {
		return nil, err
	}
	return factory.Create(ctx, name, params)
}

// Check reports whether the storage behind d answers, within timeout. A root
// that does not exist yet counts as reachable: a fresh registry has written
// nothing.
func Check(ctx context.Context, d storagedriver.StorageDriver, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := d.Stat(ctx, "/")
	var notFound storagedriver.PathNotFoundError
	if err == nil || errors.As(err, &notFound) {
		return nil
	}
	return fmt.Errorf("storage %s: %w", d.Name(), err)
}

// readSecret reads a secret kept in a file, trimming surrounding white space.
func readSecret(key, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", key, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// required reports key as missing when value is empty.
func required(key, value string) error {
	if value == "" {
		return fmt.Errorf("%s: required", key)
	}
	return nil
}
