package catalog_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/pkgformat"
)

// failingListSource fails to list the tags of the repositories in fail.
type failingListSource struct {
	catalog.Source
	mu   sync.Mutex
	fail map[string]bool
}

var errListing = errors.New("listing refused by the test")

func (s *failingListSource) Tags(ctx context.Context, repo string) ([]catalog.TagRef, error) {
	s.mu.Lock()
	fail := s.fail[repo]
	s.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("%s: %w", repo, errListing)
	}
	return s.Source.Tags(ctx, repo)
}

func (s *failingListSource) failing(repos ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = map[string]bool{}
	for _, r := range repos {
		s.fail[r] = true
	}
}

// TestReconcileKeepsWhatItCannotList: with more repositories than are
// listed at a time, a reconciliation whose listing of one repository fails
// still converges every other one, keeps the versions of that one as they
// are, and returns the listing's error; the next one converges it too.
func TestReconcileKeepsWhatItCannotList(t *testing.T) {
	var src *failingListSource
	e := newEnv(t, envOptions{lose: true, source: func(s catalog.Source) catalog.Source {
		src = &failingListSource{Source: s}
		return src
	}})
	const packages = 40
	digests := map[string]string{}
	for i := range packages {
		p, err := pkgformat.New([]pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: fmt.Appendf(nil,
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n", i)}},
			pkgformat.Options{Name: fmt.Sprintf("pkg%d", i), Version: "1.0.0"})
		if err != nil {
			t.Fatal(err)
		}
		digests[p.Metadata.Name] = e.pushPackage("ns", p)
	}
	st, err := e.cat.Reconcile(e.ctx)
	if err != nil || st.Indexed != packages || st.Removed != 0 || st.Failed != 0 {
		t.Fatalf("first reconcile: %+v, %v", st, err)
	}

	// Delete a version from a repository that cannot be listed, and from
	// every tenth other one.
	deleted := []string{"pkg7", "pkg0", "pkg10", "pkg20", "pkg30"}
	for _, name := range deleted {
		req, _ := http.NewRequest(http.MethodDelete, "http://"+e.host+"/v2/ns/"+name+"/manifests/"+digests[name], nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("delete ns/%s: %v %v", name, resp, err)
		}
		resp.Body.Close()
	}
	src.failing("ns/pkg7")
	st, err = e.cat.Reconcile(e.ctx)
	if !errors.Is(err, errListing) {
		t.Fatalf("a reconciliation that could not list ns/pkg7 returned %v, want the listing's error", err)
	}
	if st.Removed != len(deleted)-1 || st.Indexed != 0 || st.Failed != 0 {
		t.Errorf("second reconcile: %+v, want %d removed", st, len(deleted)-1)
	}
	if e.entry("ns", "pkg7", "1.0.0") == nil {
		t.Errorf("ns/pkg7:1.0.0 was removed, though its repository could not be listed")
	}
	for _, name := range deleted[1:] {
		if e.entry("ns", name, "1.0.0") != nil {
			t.Errorf("ns/%s:1.0.0 is still in the catalog after its manifest was deleted", name)
		}
	}
	if e.entry("ns", "pkg39", "1.0.0") == nil {
		t.Errorf("ns/pkg39:1.0.0, never deleted, is gone")
	}

	src.failing()
	st, err = e.cat.Reconcile(e.ctx)
	if err != nil || st.Removed != 1 || st.Indexed != 0 {
		t.Fatalf("third reconcile: %+v, %v", st, err)
	}
	if e.entry("ns", "pkg7", "1.0.0") != nil {
		t.Errorf("ns/pkg7:1.0.0 is still in the catalog once its repository could be listed")
	}
}
