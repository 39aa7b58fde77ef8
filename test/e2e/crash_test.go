package e2e

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/internal/testenv"
	"github.com/berth-registry/berth/pkgformat"
)

// TestCatalogConvergesAfterKill9 kills a real berth serve with SIGKILL while
// packages are being pushed and deleted, restarts it on the same data, and
// requires the catalog to equal the registry once it has reconciled: no
// missing, stale or duplicate versions. It does so at several moments.
func TestCatalogConvergesAfterKill9(t *testing.T) {
	data := t.TempDir()
	rng := rand.New(rand.NewSource(testenv.Seed(t, "BERTH_CRASH_SEED")))
	var seq atomic.Int64
	for round := range 3 {
		s := startServer(t, data)
		waitReconciled(t, s, 1)
		stopLoad := loadClients(t, s, "crash", 37, &seq, 4)
		time.Sleep(time.Duration(300+rng.Intn(900)) * time.Millisecond)
		if err := s.cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		<-s.done
		pushed := stopLoad()
		t.Logf("round %d: killed after %d pushes", round, pushed)

		s = startServer(t, data)
		waitReconciled(t, s, 1)
		reg, cat := registryView(t, s), catalogView(t, s)
		if len(reg) == 0 {
			t.Fatalf("round %d: nothing was pushed before the kill", round)
		}
		compareViews(t, reg, cat)
		if err := s.stop(t); err != nil {
			t.Fatalf("stop: %v\n%s", err, s.logs())
		}
	}
}

// plainPackage builds the plain package name:version, of one ConfigMap named
// c<n>, and the reference of its tag in namespace ns on s.
func plainPackage(s *server, ns, name, version string, n int64) (client.Reference, *pkgformat.Artifact, error) {
	p, err := pkgformat.New([]pkgformat.File{{Path: "manifests/cm.yaml", Mode: 0o644, Data: []byte(fmt.Sprintf(
		"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\n", n))}}, pkgformat.Options{Name: name, Version: version})
	if err != nil {
		return client.Reference{}, nil, err
	}
	art, err := p.Artifact()
	if err != nil {
		return client.Reference{}, nil, err
	}
	ref, err := client.ParseReference(s.addr + "/" + ns + "/" + name + ":" + version)
	return ref, art, err
}

// waitReconciled waits until the catalog has finished n reconciliations.
func waitReconciled(t *testing.T, s *server, n int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var st apiv1.Status
		if code := getJSON(t, s, "/api/v1/status", &st); code == http.StatusOK && st.Reconcile.Runs >= n && st.Reconcile.Error == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the catalog did not reconcile within 60s\n%s", s.logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getJSON decodes the JSON document at path into v and returns the status.
func getJSON(t *testing.T, s *server, path string, v any) int {
	t.Helper()
	resp, err := http.Get(s.url() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	return resp.StatusCode
}

// registryView is every repo:tag → digest the registry holds.
func registryView(t *testing.T, s *server) map[string]string {
	t.Helper()
	view, _ := registryTags(t, s)
	return view
}

// registryTags is every repo:tag → digest the registry holds, and the
// repo:tag the registry lists that do not resolve, with the status of
// their HEAD.
func registryTags(t *testing.T, s *server) (view map[string]string, dangling []string) {
	t.Helper()
	var repos struct {
		Repositories []string `json:"repositories"`
	}
	if code := getJSON(t, s, "/v2/_catalog?n=1000", &repos); code != http.StatusOK {
		t.Fatalf("_catalog: %d", code)
	}
	view = map[string]string{}
	for _, repo := range repos.Repositories {
		var tags struct {
			Tags []string `json:"tags"`
		}
		if code := getJSON(t, s, "/v2/"+repo+"/tags/list", &tags); code != http.StatusOK {
			continue // a repository whose tags were all deleted
		}
		for _, tag := range tags.Tags {
			req, _ := http.NewRequest(http.MethodHead, s.url()+"/v2/"+repo+"/manifests/"+tag, nil)
			req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				view[repo+":"+tag] = resp.Header.Get("Docker-Content-Digest")
			} else {
				dangling = append(dangling, fmt.Sprintf("%s:%s (%d)", repo, tag, resp.StatusCode))
			}
		}
	}
	return view, dangling
}

// catalogView is every repo:tag → digest the catalog API shows, failing on
// a version listed twice.
func catalogView(t *testing.T, s *server) map[string]string {
	t.Helper()
	view := map[string]string{}
	cursor := ""
	for {
		var page apiv1.SearchResponse
		q := url.Values{"limit": {"500"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		if code := getJSON(t, s, "/api/v1/packages?"+q.Encode(), &page); code != http.StatusOK {
			t.Fatalf("search: %d", code)
		}
		for _, p := range page.Packages {
			var detail apiv1.Package
			if code := getJSON(t, s, "/api/v1/packages/"+p.Namespace+"/"+p.Name, &detail); code != http.StatusOK {
				t.Fatalf("package %s/%s: %d", p.Namespace, p.Name, code)
			}
			for _, v := range detail.Versions {
				k := p.Namespace + "/" + p.Name + ":" + v.Version
				if _, dup := view[k]; dup {
					t.Errorf("%s listed twice", k)
				}
				view[k] = v.Digest
			}
			for _, a := range detail.Unindexed {
				t.Errorf("%s/%s:%s is unindexed (%s: %s); every pushed package is valid", a.Namespace, a.Name, a.Tag, a.Status, a.Reason)
			}
		}
		if page.Next == "" {
			return view
		}
		cursor = page.Next
	}
}

func compareViews(t *testing.T, reg, cat map[string]string) {
	t.Helper()
	var diffs []string
	for k, d := range reg {
		switch c, ok := cat[k]; {
		case !ok:
			diffs = append(diffs, "missing from the catalog: "+k)
		case c != d:
			diffs = append(diffs, fmt.Sprintf("stale: %s is %s in the registry, %s in the catalog", k, d, c))
		}
	}
	for k := range cat {
		if _, ok := reg[k]; !ok {
			diffs = append(diffs, "in the catalog but not the registry: "+k)
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Fatalf("catalog differs from registry (%d tags):\n%s", len(reg), strings.Join(diffs, "\n"))
	}
}
