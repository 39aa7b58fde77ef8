package main

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-registry/berth/test/bench/internal/floor"
)

const (
	// upstreamPkg is the registry command of the distribution module berth
	// embeds; go.mod pins it as a tool, so it is built at the same version.
	upstreamPkg = "github.com/distribution/distribution/v3/cmd/registry"
	// distributionModule is the module whose version both binaries must share.
	distributionModule = "github.com/distribution/distribution/v3"
	// floorPkg is the floor server, in this module.
	floorPkg = "./test/bench/floor"

	readyTimeout = 30 * time.Second
	stopTimeout  = 15 * time.Second
)

// binaries are the servers built from this module by one go build: berth,
// the upstream registry and the floor.
type binaries struct {
	berth, upstream, floor string
	// goVersion is the toolchain that built them; distribution is the
	// version of distributionModule in both.
	goVersion, distribution string
}

// build compiles berth, the upstream registry and the floor into dir and
// checks that berth and the upstream registry carry the same distribution
// version.
func build(ctx context.Context, dir string) (binaries, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return binaries{}, err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/berth", upstreamPkg, floorPkg)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return binaries{}, fmt.Errorf("go build: %w\n%s", err, out)
	}
	b := binaries{berth: filepath.Join(dir, "berth"), upstream: filepath.Join(dir, "registry"), floor: filepath.Join(dir, "floor")}
	berthInfo, err := buildinfo.ReadFile(b.berth)
	if err != nil {
		return binaries{}, err
	}
	upstreamInfo, err := buildinfo.ReadFile(b.upstream)
	if err != nil {
		return binaries{}, err
	}
	b.goVersion = berthInfo.GoVersion
	b.distribution = moduleVersion(berthInfo, distributionModule)
	if v := moduleVersion(upstreamInfo, distributionModule); v != b.distribution || v == "" {
		return binaries{}, fmt.Errorf("berth embeds %s %q but the upstream registry was built from %q", distributionModule, b.distribution, v)
	}
	return b, nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("run the benchmark from inside the berth module")
	}
	return filepath.Dir(gomod), nil
}

// moduleVersion is the version of module path in a binary, as its main
// module or as a dependency; "" when it has none.
func moduleVersion(info *buildinfo.BuildInfo, path string) string {
	if info.Main.Path == path {
		return info.Main.Version
	}
	for _, m := range info.Deps {
		if m.Path == path {
			return m.Version
		}
	}
	return ""
}

// server is a registry process listening on loopback. Its log (stdout and
// stderr) goes to server.log in its directory.
type server struct {
	name string
	addr string // 127.0.0.1:port
	dir  string
	cmd  *exec.Cmd
	// exited is closed when the process has exited; waitErr is then its exit status.
	exited  chan struct{}
	waitErr error
}

// startBerth runs `berth serve` with filesystem storage under dir/data.
func startBerth(ctx context.Context, bin, dir string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return start(ctx, "berth", addr, dir, "/readyz", bin,
		"serve", "--addr", addr, "--data", filepath.Join(dir, "data"))
}

// startBerthConfig runs `berth serve` as startBerth does, named name, with
// the configuration file dir/berth.yaml holding config.
func startBerthConfig(ctx context.Context, name, bin, dir, config string) (*server, error) {
	file := filepath.Join(dir, "berth.yaml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return start(ctx, name, addr, dir, "/readyz", bin,
		"serve", "--addr", addr, "--data", filepath.Join(dir, "data"), "--config", file)
}

// startUpstream runs distribution's `registry serve` with the configuration
// berth gives its embedded registry: filesystem storage under dir/data,
// deletes enabled, the in-memory blob descriptor cache, info-level logs. A
// drain timeout lets it exit cleanly on SIGTERM.
func startUpstream(ctx context.Context, bin, dir string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	config := fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
  cache:
    blobdescriptor: inmemory
http:
  addr: %s
  draintimeout: 5s
`, filepath.Join(dir, "data"), addr)
	file := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return nil, err
	}
	return start(ctx, "upstream", addr, dir, "/v2/", bin, "serve", file)
}

// startZot runs zot's `serve` with zotConfig.
func startZot(ctx context.Context, bin, dir string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	config, err := zotConfig(filepath.Join(dir, "data"), addr)
	if err != nil {
		return nil, err
	}
	file := filepath.Join(dir, "config.json")
	if err := os.WriteFile(file, config, 0o644); err != nil {
		return nil, err
	}
	return start(ctx, "zot", addr, dir, "/v2/", bin, "serve", file)
}

// zotConfig is zot's configuration: local storage under data with commit on
// (every file zot writes is synced, as distribution's filesystem driver
// does; zot's default is off), listening on addr, error-level logs. The
// rest is zot's default, dedupe and garbage collection included.
func zotConfig(data, addr string) ([]byte, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return json.MarshalIndent(map[string]any{
		"distSpecVersion": "1.1.1",
		"storage":         map[string]any{"rootDirectory": data, "commit": true},
		"http":            map[string]any{"address": host, "port": port},
		"log":             map[string]any{"level": "error"},
	}, "", "  ")
}

// zotVersion names the zot binary bin for the table's header: the commit
// `zot --version` reports (set by zot's Makefile) or else the version in its
// build information, and its path.
func zotVersion(ctx context.Context, bin string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	v := parseZotVersion(out)
	if v == "" {
		if info, err := buildinfo.ReadFile(bin); err == nil && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
	}
	if v == "" {
		return fmt.Sprintf("zot (%s)", bin)
	}
	return fmt.Sprintf("zot %s (%s)", v, bin)
}

// parseZotVersion reads the commit and binary type from the output of `zot
// --version`, a JSON log line; "" when it names no commit.
func parseZotVersion(out []byte) string {
	for line := range bytes.Lines(out) {
		var v struct {
			Message    string `json:"message"`
			Commit     string `json:"commit"`
			BinaryType string `json:"binary-type"`
		}
		if json.Unmarshal(line, &v) != nil || v.Message != "version" || v.Commit == "" {
			continue
		}
		if v.BinaryType != "" {
			return v.Commit + ", " + v.BinaryType
		}
		return v.Commit
	}
	return ""
}

// startFloor runs the floor on an empty directory dir/data and opens that
// directory for the harness to write content into.
func startFloor(ctx context.Context, bin, dir string) (*server, *floor.Store, error) {
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		return nil, nil, err
	}
	store, err := floor.NewStore(data)
	if err != nil {
		return nil, nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	s, err := start(ctx, "floor", addr, dir, "/v2/", bin, "-addr", addr, "-dir", data)
	if err != nil {
		store.Close()
		return nil, nil, err
	}
	return s, store, nil
}

// freeAddr picks a free loopback port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// start runs bin and waits until GET readyPath answers 200.
func start(ctx context.Context, name, addr, dir, readyPath, bin string, args ...string) (*server, error) {
	return startReady(ctx, name, addr, dir, "http://"+addr+readyPath, loopbackTransport(addr), bin, args...)
}

// startReady runs bin and waits until GET readyURL, sent through transport,
// answers 200.
func startReady(ctx context.Context, name, addr, dir, readyURL string, transport *http.Transport, bin string, args ...string) (*server, error) {
	logFile, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = serverEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	s := &server{name: name, addr: addr, dir: dir, cmd: cmd, exited: make(chan struct{})}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := s.waitReady(ctx, readyURL, transport); err != nil {
		s.stop()
		return nil, fmt.Errorf("%s: %w\n%s", name, err, s.logTail())
	}
	return s, nil
}

// serverEnv is the environment of every server: the caller's, without
// settings that would change how berth or upstream behaves (BERTH_*,
// REGISTRY_*, OTEL_*), and with upstream's tracing exporter off so that it
// sends nothing anywhere.
func serverEnv(environ []string) []string {
	env := make([]string, 0, len(environ)+1)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "BERTH_") && !strings.HasPrefix(kv, "REGISTRY_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	return append(env, "OTEL_TRACES_EXPORTER=none")
}

func (s *server) waitReady(ctx context.Context, url string, transport *http.Transport) error {
	defer transport.CloseIdleConnections()
	client := &http.Client{Timeout: time.Second, Transport: transport}
	deadline := time.After(readyTimeout)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if resp, err := client.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.exited:
			return fmt.Errorf("exited before it was ready: %v", s.waitErr)
		case <-deadline:
			return fmt.Errorf("GET %s did not answer 200 within %s", url, readyTimeout)
		case <-tick.C:
		}
	}
}

// stop sends SIGTERM and waits for the process to exit, killing it after
// stopTimeout. It returns an error when the exit was not clean.
func (s *server) stop() error {
	select {
	case <-s.exited:
		return s.exitError()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.exitError()
	case <-time.After(stopTimeout):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not exit within %s of SIGTERM; killed", s.name, stopTimeout)
	}
}

func (s *server) exitError() error {
	if s.waitErr != nil {
		return fmt.Errorf("%s: %w\n%s", s.name, s.waitErr, s.logTail())
	}
	return nil
}

// logTail is the end of the server's log, for error messages.
func (s *server) logTail() string {
	const max = 4 << 10
	b, err := os.ReadFile(filepath.Join(s.dir, "server.log"))
	if err != nil {
		return ""
	}
	if len(b) > max {
		b = b[len(b)-max:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// loopbackTransport is an HTTP/1.1 transport that keeps enough idle
// connections for the workloads' concurrency, uses no proxy, and refuses to
// dial anything but addr.
func loopbackTransport(addrs ...string) *http.Transport {
	dialer := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &http.Transport{
		DialContext: func(ctx context.Context, network, target string) (net.Conn, error) {
			if !slices.Contains(addrs, target) {
				return nil, fmt.Errorf("refusing to dial %s: the benchmark talks only to %s", target, strings.Join(addrs, ", "))
			}
			return dialer.DialContext(ctx, network, target)
		},
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}
