package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-registry/berth/pkgformat"
)

// TestServeStopsWithinShutdownTimeoutWhileIndexingHostileYAML sends SIGTERM
// while the catalog indexes pushes of many tiny YAML documents (the issue's
// 29 KB tarball of 16 MiB) and requires berth serve to exit in time.
func TestServeStopsWithinShutdownTimeoutWhileIndexingHostileYAML(t *testing.T) {
	requireOras(t)
	const shutdownTimeout = 2 * time.Second
	work := t.TempDir()
	config := filepath.Join(work, "berth.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf("shutdownTimeout: %s\n", shutdownTimeout)), 0o600); err != nil {
		t.Fatal(err)
	}
	var tgz bytes.Buffer
	files := []pkgformat.File{
		{Path: "README.md", Mode: 0o644, Data: []byte("hostile\n")},
		{Path: "manifests/docs.yaml", Mode: 0o644, Data: []byte(strings.Repeat("---\na: 1\n", (16<<20)/9))},
	}
	if err := pkgformat.WriteArchive(&tgz, files); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "hostile.tgz"), tgz.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", config)
	for i := range 6 {
		oras(t, work, "push", "--plain-http", "--artifact-type", pkgformat.ArtifactType,
			fmt.Sprintf("%s/hostile/h%d:1.0.0", s.addr, i), "hostile.tgz:"+pkgformat.ContentMediaType)
	}
	start := time.Now()
	err := s.stop(t)
	took := time.Since(start)
	if took > shutdownTimeout+time.Second {
		t.Fatalf("berth serve exited %s after SIGTERM, past its shutdownTimeout of %s\n%s", took, shutdownTimeout, s.logs())
	}
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.logs())
	}
}
