package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
)

// TestUsageCLI pushes a package into a namespace with a quota and one
// without, and reads their storage with berth usage, as a table and as
// JSON, from a real berth serve.
func TestUsageCLI(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(cfg, []byte("namespaces:\n  - name: team-a\n    quota: 10MiB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, "", "--config", cfg)
	work := t.TempDir()
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	src := kudoFixture(t, "kafka", "2.5.1-1.3.2")
	berth(t, work, "push", src, s.addr+"/team-a/kafka")
	berth(t, work, "push", src, s.addr+"/other/kafka")

	var a apiv1.NamespaceUsage
	out := berth(t, work, "usage", "team-a", "--server", s.addr, "--format", "json").stdout
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		t.Fatalf("usage team-a --format json: %v\n%s", err, out)
	}
	// The config, the content and the manifest, counted once.
	if a.Namespace != "team-a" || a.LimitBytes != 10<<20 || a.Blobs != 3 || a.UsedBytes <= 0 || a.UsedBytes > 1<<20 || a.OpenUploads != 0 {
		t.Errorf("usage of team-a: %+v", a)
	}

	table := berth(t, work, "usage", "--server", s.addr).stdout
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE USED LIMIT USE% BLOBS UPLOADS" {
		t.Fatalf("berth usage:\n%s", table)
	}
	other, teamA := strings.Fields(lines[1]), strings.Fields(lines[2])
	if other[0] != "other" || other[3] != "-" || other[4] != "-" || other[5] != "3" {
		t.Errorf("other's row %q, want no limit and 3 blobs", lines[1])
	}
	if teamA[0] != "team-a" || strings.Join(teamA[3:5], " ") != "10.0 MiB" || !strings.HasSuffix(teamA[5], "%") {
		t.Errorf("team-a's row %q, want a 10.0 MiB limit and the share used", lines[2])
	}

	r := run(t, work, berthBin, "usage", "nobody", "--server", s.addr)
	if r.code != 1 || !strings.Contains(r.stderr, `namespace "nobody" has no usage to show`) {
		t.Errorf("usage of an unknown namespace: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}
