package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestZeroConfigServeUsesDataInWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	s := startProcess(t, dir, "serve", "--addr", "127.0.0.1:0")
	if status, _ := s.get(t, "/v2/"); status != 200 {
		t.Fatalf("GET /v2/ = %d", status)
	}
	if status, body := s.get(t, "/readyz"); status != 200 || !strings.Contains(body, `"storage":"ok"`) {
		t.Fatalf("GET /readyz = %d %s", status, body)
	}
	berth(t, dir, "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay")
	if _, err := os.Stat(filepath.Join(dir, "data", "registry", "docker", "registry", "v2", "repositories", "kudo", "cowsay")); err != nil {
		t.Fatalf("pushed package not under ./data: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "http-secret")); err != nil {
		t.Fatalf("upload secret not kept under ./data: %v", err)
	}
}

// TestServeRefusesADataDirectoryInUse: a second berth serve on the data
// directory of a running one refuses to start, naming the holder, and
// starts once the first has stopped; so does berth serve catalog.
func TestServeRefusesADataDirectoryInUse(t *testing.T) {
	s := startServer(t, "")
	for _, cmd := range [][]string{{"serve"}, {"serve", "catalog", "--config", writeCatalogOnly(t)}} {
		r := run(t, "", berthBin, append(cmd, "--addr", "127.0.0.1:0", "--data", s.data)...)
		if r.code != 1 || !strings.Contains(r.stderr, "data: the data directory is in use by another berth serve ("+s.data+"): held by process ") {
			t.Errorf("berth %s on a data directory in use: exit %d\n%s", strings.Join(cmd, " "), r.code, r.stderr)
		}
	}
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	again := startServer(t, s.data)
	if status, _ := again.get(t, "/v2/"); status != 200 {
		t.Fatalf("GET /v2/ after the first stopped = %d", status)
	}
}

// writeCatalogOnly writes the configuration of a split berth serve catalog
// that follows a registry on a port nothing listens on.
func writeCatalogOnly(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "catalog.yaml")
	if err := os.WriteFile(file, []byte("catalog:\n  registry: http://127.0.0.1:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

func TestServeStopsCleanlyOnSIGTERM(t *testing.T) {
	s := startServer(t, "")
	if err := s.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, s.logs())
	}
	if !strings.Contains(s.logs(), "msg=stopped") {
		t.Fatalf("no clean-stop line in the log:\n%s", s.logs())
	}
}

func TestPackagesSurviveRestart(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	pushed := berth(t, "", "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay", "--format", "json")
	if err := s.stop(t); err != nil {
		t.Fatal(err)
	}
	s = startServer(t, data)
	info := berth(t, "", "inspect", s.addr+"/kudo/cowsay:0.2.0", "--format", "json")
	if digestOf(t, pushed.stdout) != digestOf(t, info.stdout) {
		t.Fatalf("digest after restart %s, pushed %s", digestOf(t, info.stdout), digestOf(t, pushed.stdout))
	}
}

func TestServeRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"unknown key", []string{"--config", write("unknown.yaml", "log:\n  colour: red\n")}, nil, `unknown key "log.colour"`},
		{"bad level", []string{"--config", write("level.yaml", "log:\n  level: loud\n")}, nil, "log.level"},
		{"bad driver from env", nil, []string{"BERTH_STORAGE_DRIVER=floppy"}, `storage.driver: unknown driver "floppy"`},
		{"missing config file", []string{"--config", filepath.Join(dir, "nope.yaml")}, nil, "nope.yaml"},
		{"config file from env", nil, []string{"BERTH_CONFIG=" + write("env.yaml", "adress: x\n")}, `unknown key "adress"`},
		{"bad addr flag", []string{"--addr", "nowhere"}, nil, "addr: want host:port"},
		{"s3 without bucket", []string{"--config", write("s3.yaml", "storage:\n  driver: s3\n")}, nil, "storage.s3.bucket: required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := append([]string{"serve", "--data", t.TempDir()}, tc.args...)
			r := runEnv(t, tc.env, berthBin, cmd...)
			if r.code != 1 {
				t.Fatalf("berth serve: exit %d, want 1:\n%s", r.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("stderr %q does not name %q", r.stderr, tc.want)
			}
		})
	}
}

func TestMetricsCountRegistryAndCatalogTraffic(t *testing.T) {
	s := startServer(t, "")
	berth(t, "", "push", kudoFixture(t, "cowsay", "0.2.0"), s.addr+"/kudo/cowsay")
	waitUntil(t, s, "cowsay indexed", func() bool {
		code, _ := s.get(t, "/api/v1/packages/kudo/cowsay/versions/0.2.0")
		return code == 200
	})
	status, body := s.get(t, "/metrics")
	if status != 200 {
		t.Fatalf("/metrics: %d", status)
	}
	for _, want := range []string{
		`berth_http_requests_total{code="201",method="PUT",route="v2_manifest"} 1`,
		`berth_http_request_bytes_total{route="v2_blob_upload"}`,
		`registry_storage_action_seconds_count{action="Stat",driver="filesystem"}`,
		`berth_registry_flush_wait_seconds_count{result="ok"}`,
		`berth_catalog_indexed_total{status="indexed"} 1`,
		`berth_catalog_reconcile_duration_seconds_count 1`,
		`berth_http_requests_total{code="200",method="GET",route="/api/v1/packages/{namespace}/{name}/versions/{version}"}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
