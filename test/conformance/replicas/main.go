// Command replicas runs berth as docs/scale-out.md deploys it, for the
// conformance suite (test/conformance/run.sh --replicas): a throwaway
// PostgreSQL cluster (internal/pgtest), a versitygw S3 gateway with one
// bucket, two `berth serve` on both, and in front of them a reverse proxy
// that sends each request, whatever its path, to the next replica in turn,
// as a load balancer without session affinity does. The replicas trust the
// proxy's X-Forwarded headers (trustedProxies), so the token realm they
// announce is the proxy's.
//
//	replicas -berth bin/berth -versitygw bin/versitygw -work DIR [-config auth.yaml]
//
// -config is more YAML for the replicas' configuration (run.sh's auth
// section). Once both replicas are ready, replicas prints the proxy's
// address on standard output; it stops everything at SIGINT or SIGTERM.
// Each replica's log is DIR/berth-a.log and DIR/berth-b.log.
package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/berth-registry/berth/internal/pgtest"
)

func main() {
	berth := flag.String("berth", "bin/berth", "the berth binary")
	versitygw := flag.String("versitygw", "bin/versitygw", "the versitygw binary")
	work := flag.String("work", "", "a directory for the replicas' data, logs and configuration (required)")
	extra := flag.String("config", "", "a file of more YAML for the replicas' configuration")
	flag.Parse()
	if *work == "" {
		fmt.Fprintln(os.Stderr, "replicas: -work is required: a directory for the replicas' data, logs and configuration")
		os.Exit(2)
	}
	if err := run(*berth, *versitygw, *work, *extra); err != nil {
		fmt.Fprintln(os.Stderr, "replicas:", err)
		os.Exit(1)
	}
}

// run starts everything, prints the proxy's address and waits for a
// signal; it stops what it started on its way out.
func run(berth, versitygw, work, extra string) error {
	var stops []func()
	defer func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}()
	cluster, err := pgtest.Start()
	if err != nil {
		return err
	}
	stops = append(stops, func() { _ = cluster.Stop() })
	dsn, _, err := cluster.CreateDatabase(context.Background())
	if err != nil {
		return err
	}
	gw, secretFile, stop, err := startVersitygw(versitygw, work)
	if err != nil {
		return err
	}
	stops = append(stops, stop)
	secret := rand.Text()
	httpSecret := filepath.Join(work, "http-secret")
	if err := os.WriteFile(httpSecret, []byte(secret), 0o600); err != nil {
		return err
	}
	more := ""
	if extra != "" {
		b, err := os.ReadFile(extra)
		if err != nil {
			return err
		}
		more = string(b)
	}
	config := filepath.Join(work, "replicas.yaml")
	doc := fmt.Sprintf(`storage:
  driver: s3
  disableRedirect: true
  s3:
    bucket: conformance
    region: us-east-1
    regionEndpoint: http://%s
    accessKey: conformance
    secretKeyFile: %s
    forcePathStyle: true
    insecure: true
registry:
  httpSecretFile: %s
catalog:
  database: %s
trustedProxies: [127.0.0.1/32]
%s`, gw, secretFile, httpSecret, dsn, more)
	if err := os.WriteFile(config, []byte(doc), 0o600); err != nil {
		return err
	}
	// One replica after the other: the first creates what they share
	// (the token key, the database's tables).
	var backends []string
	for _, name := range []string{"a", "b"} {
		addr, stop, err := startBerth(berth, config, filepath.Join(work, "data-"+name), filepath.Join(work, "berth-"+name+".log"))
		if err != nil {
			return fmt.Errorf("replica %s: %w", name, err)
		}
		stops = append(stops, stop)
		backends = append(backends, addr)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var next atomic.Int64
	proxy := &http.Server{Handler: &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(&url.URL{Scheme: "http", Host: backends[next.Add(1)%int64(len(backends))]})
		r.SetXForwarded()
	}}}
	go func() { _ = proxy.Serve(ln) }()
	stops = append(stops, func() { _ = proxy.Close() })
	fmt.Println(ln.Addr().String())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	return nil
}

// startVersitygw starts versitygw on a free loopback port, its posix
// backend under work with the bucket conformance, and returns its address,
// the file of its secret key and the function that stops it.
func startVersitygw(bin, work string) (addr, secretFile string, stop func(), err error) {
	root := filepath.Join(work, "s3")
	if err := os.MkdirAll(filepath.Join(root, "conformance"), 0o755); err != nil {
		return "", "", nil, err
	}
	secret := rand.Text()
	secretFile = filepath.Join(work, "s3-secret-key")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		return "", "", nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", nil, err
	}
	addr = ln.Addr().String()
	ln.Close()
	log, err := os.Create(filepath.Join(work, "versitygw.log"))
	if err != nil {
		return "", "", nil, err
	}
	// The root account comes from the environment, keeping the secret out
	// of the process list.
	cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID=conformance", "ROOT_SECRET_ACCESS_KEY="+secret)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return "", "", nil, err
	}
	stop = func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		log.Close()
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return addr, secretFile, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", "", nil, fmt.Errorf("versitygw did not answer on %s within 30s (its log: %s)", addr, log.Name())
		}
	}
}

var servingRE = regexp.MustCompile(`msg="berth serving" addr=(\S+)`)

// startBerth starts berth serve with config and data on a free loopback
// port, its log in logFile, and returns its address once it serves and the
// function that stops it.
func startBerth(bin, config, data, logFile string) (addr string, stop func(), err error) {
	log, err := os.Create(logFile)
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--data", data, "--config", config)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		log.Close()
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return "", nil, err
	}
	serving := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(log, sc.Text())
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				serving <- m[1]
			}
		}
		done <- cmd.Wait()
	}()
	stop = func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		log.Close()
	}
	select {
	case addr = <-serving:
		return addr, stop, nil
	case err := <-done:
		log.Close()
		return "", nil, fmt.Errorf("berth serve exited before serving (%v); its log: %s", err, logFile)
	case <-time.After(60 * time.Second):
		stop()
		return "", nil, fmt.Errorf("berth serve did not serve within 60s (its log: %s)", logFile)
	}
}
