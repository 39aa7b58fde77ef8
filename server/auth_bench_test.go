package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/berth-registry/berth/auth"
	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/cputime"
	"github.com/berth-registry/berth/registry"
	"github.com/berth-registry/berth/storage"
)

// BenchmarkAuthOverhead measures what auth adds to each request of a package
// pull and push, as `make bench` sends them: berth's whole server with auth
// off, and with auth on and a client holding a token from GET /auth/token
// (an htpasswd user with one rule, as test/bench/auth.go configures it).
// Reads are served from the filesystem (berth's fast read path), uploads go
// to in-memory storage, so that no disk flush is timed; "token" is GET
// /auth/token with Basic credentials whose check is cached:
//
//	go test -run - -bench AuthOverhead -benchmem -count 6 ./server/
func BenchmarkAuthOverhead(b *testing.B) {
	for _, on := range []bool{false, true} {
		mode := "off"
		if on {
			mode = "on"
		}
		for _, method := range []string{http.MethodHead, http.MethodGet} {
			b.Run(mode+"/manifest-"+strings.ToLower(method), func(b *testing.B) {
				s := newAuthBenchStack(b, on, "filesystem")
				serve(b, s, http.MethodPut, "/v2/bench/pkg/manifests/1.0.0", benchManifest(b, s), http.StatusCreated)
				defer cputime.Report(b)()
				for b.Loop() {
					serve(b, s, method, "/v2/bench/pkg/manifests/1.0.0", nil, http.StatusOK)
				}
			})
		}
		b.Run(mode+"/blob-get", func(b *testing.B) {
			s := newAuthBenchStack(b, on, "filesystem")
			var m struct{ Config struct{ Digest string } }
			if err := json.Unmarshal(benchManifest(b, s), &m); err != nil {
				b.Fatal(err)
			}
			defer cputime.Report(b)()
			for b.Loop() {
				serve(b, s, http.MethodGet, "/v2/bench/pkg/blobs/"+m.Config.Digest, nil, http.StatusOK)
			}
		})
		b.Run(mode+"/content-get-http", func(b *testing.B) {
			// A 50 KiB content layer over loopback HTTP, as a pull fetches
			// it: net/http sends an *os.File with sendfile(2) only when
			// every wrapper of the response writer lets it.
			s := newAuthBenchStack(b, on, "filesystem")
			var m struct{ Layers []struct{ Digest string } }
			if err := json.Unmarshal(benchManifest(b, s), &m); err != nil {
				b.Fatal(err)
			}
			srv := httptest.NewServer(s)
			defer srv.Close()
			client := srv.Client()
			url := srv.URL + "/v2/bench/pkg/blobs/" + m.Layers[0].Digest
			buf := make([]byte, 64<<10)
			defer cputime.Report(b)()
			for b.Loop() {
				req, err := http.NewRequest(http.MethodGet, url, nil)
				if err != nil {
					b.Fatal(err)
				}
				if s.authorization != "" {
					req.Header.Set("Authorization", s.authorization)
				}
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || n != 50<<10 {
					b.Fatalf("GET %s: %s, %d bytes, %v", url, resp.Status, n, err)
				}
			}
		})
		b.Run(mode+"/blob-upload", func(b *testing.B) {
			s := newAuthBenchStack(b, on, "inmemory")
			defer cputime.Report(b)()
			for i := 0; b.Loop(); i++ {
				data := fmt.Appendf(nil, `{"name":"pkg","n":%d}`, i)
				w := serve(b, s, http.MethodPost, "/v2/bench/pkg/blobs/uploads/", nil, http.StatusAccepted)
				serve(b, s, http.MethodPut, w.Header().Get("Location")+"&digest="+digest.FromBytes(data).String(), data, http.StatusCreated)
			}
		})
		if on {
			b.Run(mode+"/token", func(b *testing.B) {
				s := newAuthBenchStack(b, on, "inmemory")
				defer cputime.Report(b)()
				for b.Loop() {
					s.token(b)
				}
			})
			// What a client pays per repository it comes to: a token, and
			// the first request that bears it.
			b.Run(mode+"/token-first-use", func(b *testing.B) {
				s := newAuthBenchStack(b, on, "filesystem")
				var m struct{ Config struct{ Digest string } }
				if err := json.Unmarshal(benchManifest(b, s), &m); err != nil {
					b.Fatal(err)
				}
				req := httptest.NewRequest(http.MethodGet, "/v2/bench/pkg/blobs/"+m.Config.Digest, nil)
				defer cputime.Report(b)()
				for b.Loop() {
					req.Header.Set("Authorization", "Bearer "+s.token(b))
					w := httptest.NewRecorder()
					s.ServeHTTP(w, req)
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s: %d %s", req.URL, w.Code, w.Body)
					}
				}
			})
		}
	}
}

// authBenchStack is berth's server, with auth on or off, as a client sees
// it: requests without an Authorization header get the client's.
type authBenchStack struct {
	handler       http.Handler
	authorization string
	password      string
}

func (s *authBenchStack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.authorization != "" && r.Header.Get("Authorization") == "" {
		r.Header.Set("Authorization", s.authorization)
	}
	s.handler.ServeHTTP(w, r)
}

const authBenchUser = "bench"

func newAuthBenchStack(b *testing.B, on bool, driver string) *authBenchStack {
	dir := b.TempDir()
	sc := &storage.Config{Driver: driver}
	if driver == "filesystem" {
		sc.Filesystem.RootDirectory = filepath.Join(dir, "data")
	}
	reg, err := registry.New(context.Background(), registry.Options{Storage: sc, HTTPSecret: "bench", Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { reg.Close() })
	if !on {
		return &authBenchStack{handler: New(Options{Registry: reg, Logger: quiet}).Handler()}
	}
	s := &authBenchStack{password: "bench-password"}
	hash, err := bcrypt.GenerateFromPassword([]byte(s.password), bcrypt.MinCost)
	if err != nil {
		b.Fatal(err)
	}
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(authBenchUser+":"+string(hash)+"\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	c := &config.Config{Data: dir, Auth: &config.Auth{Htpasswd: htpasswd, Rules: []config.AuthRule{
		{Subjects: []string{"user:" + authBenchUser}, Repositories: []string{"bench/*", "bench/*/*"}, Actions: []string{"pull", "push"}},
	}}}
	c.SetDefaults()
	policy, err := auth.NewPolicy(c.Auth)
	if err != nil {
		b.Fatal(err)
	}
	audit := auth.NewAuditor(io.Discard)
	metrics := auth.NewMetrics(prometheus.NewRegistry())
	authn, err := auth.NewAuthn(c.Auth, auth.AuthnOptions{Policy: policy, Audit: audit, Metrics: metrics})
	if err != nil {
		b.Fatal(err)
	}
	s.handler = New(Options{
		Registry: auth.Registry(reg, auth.RegistryOptions{Authenticator: authn, Policy: policy, Service: c.Auth.Service, Audit: audit, Metrics: metrics}),
		Auth:     authn.Handler(),
		Logger:   quiet,
	}).Handler()
	s.authorization = "Bearer " + s.token(b)
	return s
}

// token asks GET /auth/token for pull and push on bench/pkg.
func (s *authBenchStack) token(b *testing.B) string {
	req := httptest.NewRequest(http.MethodGet, "/auth/token?service=berth&scope=repository:bench/pkg:pull,push", nil)
	req.SetBasicAuth(authBenchUser, s.password)
	w := httptest.NewRecorder()
	s.ServeHTTP(w, req)
	var resp struct {
		Token string `json:"token"`
	}
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &resp) != nil || resp.Token == "" {
		b.Fatalf("GET /auth/token: %d %s", w.Code, w.Body)
	}
	return resp.Token
}
