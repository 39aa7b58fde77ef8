package sources

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/berth-registry/berth/config"
	"github.com/berth-registry/berth/internal/cputime"
	"github.com/berth-registry/berth/pkgsource"
)

// BenchmarkCheckUnchanged is one cycle of checks of N sources none of
// which changed (an op checks them all, DefaultConcurrency at once, as
// Run does): http sources answer 304 to the conditional GET, git sources
// one ls-remote each. Nothing is built; each check saves its state. The
// servers run in this process for http (their CPU time is counted), in
// git http-backend processes for git (not counted).
func BenchmarkCheckUnchanged(b *testing.B) {
	etag := `"v1"`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Write([]byte("not a tarball"))
	}))
	b.Cleanup(srv.Close)
	b.Run("http/1000", func(b *testing.B) {
		benchCheck(b, 1000, func(i int) config.Source {
			return config.Source{Package: fmt.Sprintf("p%04d", i), Kind: "http", URL: fmt.Sprintf("%s/p%04d.tgz", srv.URL, i)}
		}, func(config.Source) pkgsource.Resolved {
			return pkgsource.Resolved{Kind: pkgsource.HTTP, Revision: etag}
		})
	})
	b.Run("git/100", func(b *testing.B) {
		repo := newGitRepo(b, chart("demo", "1.0.0", ""))
		head := repo.git("rev-parse", "HEAD")
		benchCheck(b, 100, func(i int) config.Source {
			return config.Source{Package: fmt.Sprintf("p%04d", i), Kind: "git", URL: repo.url, Ref: "main"}
		}, func(config.Source) pkgsource.Resolved {
			return pkgsource.Resolved{Kind: pkgsource.Git, Ref: "refs/heads/main", Revision: head}
		})
	})
}

// benchCheck checks n sources, each already handled at what resolved
// says, once per op.
func benchCheck(b *testing.B, n int, source func(int) config.Source, resolved func(config.Source) pkgsource.Resolved) {
	srcs := make([]config.Source, n)
	for i := range srcs {
		srcs[i] = source(i)
	}
	e := newEnv(b, nil, srcs...)
	var seed []State
	for _, s := range e.tr.sources {
		r := resolved(s.src)
		r.URL = s.src.URL
		seed = append(seed, State{Key: s.key, Spec: s.fingerprint, Resolved: r, Handled: r.Revision})
	}
	if err := e.store.Save(context.Background(), seed...); err != nil {
		b.Fatal(err)
	}
	for _, st := range seed {
		e.tr.states[st.Key] = st
	}
	ctx := context.Background()
	b.ReportAllocs()
	defer cputime.Report(b)()
	for b.Loop() {
		work := make(chan *tracked)
		var wg sync.WaitGroup
		for range DefaultConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for s := range work {
					e.tr.check(ctx, s)
				}
			}()
		}
		for _, s := range e.tr.sources {
			work <- s
		}
		close(work)
		wg.Wait()
		e.tr.flush(ctx)
	}
	b.StopTimer()
	if got := builds(e.tr, buildPublished) + builds(e.tr, buildUnchanged) + builds(e.tr, buildFailed); got != 0 {
		b.Fatalf("%v builds of unchanged sources, want none", got)
	}
	if failed := checksOf(e.tr, checkFailed); failed != 0 {
		b.Fatalf("%v checks failed", failed)
	}
}
