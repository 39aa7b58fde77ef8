package main

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// fakeCatalog stands in for a berth server's catalog API. It answers GET
// /api/v1<path> with the JSON document docs[path] (an http.HandlerFunc
// answers itself), any other path with the API's NOT_FOUND error, and
// records the requests it gets. The catalog commands' tests only need its
// host, so they can run as well against a real berth serve.
type fakeCatalog struct {
	host string
	mu   sync.Mutex
	reqs []*url.URL
}

// serveCatalog starts a fakeCatalog on a loopback address (plain HTTP by
// default) for the test, with an empty Docker config and no BERTH_SERVER.
func serveCatalog(t *testing.T, docs map[string]any) *fakeCatalog {
	t.Helper()
	setup(t)
	t.Setenv("BERTH_SERVER", "")
	f := &fakeCatalog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.reqs = append(f.reqs, r.URL)
		f.mu.Unlock()
		switch doc := docs[strings.TrimPrefix(r.URL.Path, "/api/v1")]; doc := doc.(type) {
		case nil:
			writeAPIError(w, http.StatusNotFound, "NOT_FOUND", "no such thing: "+r.URL.Path)
		case http.HandlerFunc:
			doc(w, r)
		default:
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			json.NewEncoder(w).Encode(doc)
		}
	}))
	t.Cleanup(srv.Close)
	f.host = strings.TrimPrefix(srv.URL, "http://")
	return f
}

// requests returns the requests the fake got, as path?query.
func (f *fakeCatalog) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.reqs))
	for i, u := range f.reqs {
		out[i] = u.RequestURI()
	}
	return out
}

// writeAPIError writes the catalog API's error document.
func writeAPIError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(apiv1.Errors{Errors: []apiv1.Error{{Code: code, Message: message}}})
}

// summary returns the search summary of a package.
func summary(ns, name, version string, format pkgformat.Format, description string) apiv1.PackageSummary {
	return apiv1.PackageSummary{
		Namespace: ns, Name: name, Version: version, Format: format, Description: description,
		Digest: "sha256:" + strings.Repeat("0", 64), Updated: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
	}
}

// testSearch is a first page of two of five matches.
var testSearch = apiv1.SearchResponse{
	Packages: []apiv1.PackageSummary{
		summary("kudo", "kafka", "2.5.1_1.3.2", pkgformat.KUDO,
			"Apache Kafka is a distributed event streaming platform used by thousands of companies"),
		summary("operators", "etcd", "0.9.4", pkgformat.OLM, "Create and maintain\nhighly-available etcd clusters\x1b[2J"),
	},
	Facets: apiv1.Facets{Format: map[string]int{"olm": 2, "kudo": 3}, Namespace: map[string]int{"kudo": 3, "operators": 2}},
	Total:  5,
	Next:   "page2",
}

func TestSearchCmd(t *testing.T) {
	f := serveCatalog(t, map[string]any{"/packages": testSearch})

	out := mustBerth(t, "search", "kafka", "streams", "--server", f.host, "--namespace", "kudo", "--type", "kudo",
		"--channel", "stable", "--provides", "kafka.kudo.dev/Kafka", "--kube-version", "1.29", "--image", "quay.io/org/app", "--verified",
		"--sort", "updated", "--limit", "2")
	want := `NAME             VERSION       FORMAT   DESCRIPTION
kudo/kafka       2.5.1_1.3.2   kudo     Apache Kafka is a distributed event streaming platform used…
operators/etcd   0.9.4         olm      Create and maintain highly-available etcd clusters [2J
2 of 5 packages · kudo 3 · olm 2
Use --limit N (up to 500) or --all to list more.
`
	if out != want {
		t.Errorf("search output:\n%s\nwant:\n%s", out, want)
	}
	query := url.Values{
		"q": {"kafka streams"}, "namespace": {"kudo"}, "format": {"kudo"}, "channel": {"stable"},
		"provides": {"kafka.kudo.dev/Kafka"}, "kubeVersion": {"1.29"}, "image": {"quay.io/org/app"}, "verified": {"true"},
		"sort": {"updated"}, "limit": {"2"},
	}
	if got, want := f.requests(), []string{"/api/v1/packages?" + query.Encode()}; !reflect.DeepEqual(got, want) {
		t.Errorf("requests %q, want %q", got, want)
	}

	// One JSON document: the server's answer.
	var res apiv1.SearchResponse
	decode(t, mustBerth(t, "search", "--server", f.host, "--verified=false", "--format", "json"), &res)
	if !reflect.DeepEqual(res, testSearch) {
		t.Errorf("search --format json = %+v, want %+v", res, testSearch)
	}
	if got := f.requests()[1]; got != "/api/v1/packages?verified=false" {
		t.Errorf("request %s", got)
	}

	// BERTH_SERVER names the server when --server does not.
	t.Setenv("BERTH_SERVER", f.host)
	if out := mustBerth(t, "search", "etcd"); !strings.Contains(out, "operators/etcd") {
		t.Errorf("search with BERTH_SERVER:\n%s", out)
	}
}

func TestSearchCmdAll(t *testing.T) {
	pages := map[string]apiv1.SearchResponse{
		"":   {Packages: testSearch.Packages, Facets: testSearch.Facets, Total: 5, Next: "p2"},
		"p2": {Packages: []apiv1.PackageSummary{summary("kudo", "zookeeper", "0.3.0", pkgformat.KUDO, "")}, Facets: testSearch.Facets, Total: 5, Next: "p3"},
		"p3": {Packages: []apiv1.PackageSummary{
			summary("kudo", "cassandra", "3.11", pkgformat.KUDO, "Cassandra"),
			summary("operators", "prometheus", "0.47.0", pkgformat.OLM, "Prometheus"),
		}, Facets: testSearch.Facets, Total: 5},
	}
	f := serveCatalog(t, map[string]any{"/packages": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
		json.NewEncoder(w).Encode(pages[r.URL.Query().Get("cursor")])
	})})

	out := mustBerth(t, "search", "--server", f.host, "--all")
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"kudo/kafka", "operators/etcd", "kudo/zookeeper 0.3.0 kudo - kudo/cassandra", "operators/prometheus 0.47.0 olm Prometheus"} {
		if !strings.Contains(words, want) {
			t.Errorf("search --all does not show %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "--all") || strings.Count(out, "\n") != 6 {
		t.Errorf("search --all shows more than the header and five packages:\n%s", out)
	}
	wantReqs := []string{"/api/v1/packages?limit=500", "/api/v1/packages?cursor=p2&limit=500", "/api/v1/packages?cursor=p3&limit=500"}
	if got := f.requests(); !reflect.DeepEqual(got, wantReqs) {
		t.Errorf("requests %q, want %q", got, wantReqs)
	}

	var res apiv1.SearchResponse
	decode(t, mustBerth(t, "search", "--server", f.host, "--all", "--limit", "2", "--format", "json"), &res)
	var names []string
	for _, p := range res.Packages {
		names = append(names, p.Name)
	}
	if strings.Join(names, " ") != "kafka etcd zookeeper cassandra prometheus" || res.Next != "" || res.Total != 5 ||
		!reflect.DeepEqual(res.Facets, testSearch.Facets) {
		t.Errorf("search --all --format json: %v, next %q, total %d, facets %v", names, res.Next, res.Total, res.Facets)
	}
	if got := f.requests()[3]; got != "/api/v1/packages?limit=2" {
		t.Errorf("request %s", got)
	}
}

func TestSearchCmdNoMatchesAndErrors(t *testing.T) {
	f := serveCatalog(t, map[string]any{
		"/packages": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("kubeVersion") == "x" {
				writeAPIError(w, http.StatusBadRequest, "INVALID", `kubeVersion "x" is not a Kubernetes version`)
				return
			}
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			w.Write([]byte(`{"packages":[],"facets":{"format":{},"namespace":{}},"total":0,"next":""}`))
		}),
	})
	code, stdout, stderr := berth(t, "search", "nothing", "--server", f.host)
	if code != 0 || stdout != "" || stderr != "no packages match\n" {
		t.Errorf("search without matches: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var res apiv1.SearchResponse
	decode(t, mustBerth(t, "search", "nothing", "--server", f.host, "--format", "json"), &res)
	if res.Packages == nil || len(res.Packages) != 0 {
		t.Errorf("search --format json without matches: %+v", res)
	}

	code, stdout, stderr = berth(t, "search", "--server", f.host, "--kube-version", "x")
	if want := "Error: search: invalid: kubeVersion \"x\" is not a Kubernetes version\n"; code != 1 || stdout != "" || stderr != want {
		t.Errorf("search refused by the server: exit %d\nstdout: %s\nstderr: %s\nwant: %s", code, stdout, stderr, want)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	code, _, stderr = berth(t, "search", "--server", closed)
	if want := "Error: search: cannot reach the berth server at http://" + closed + "/api/v1: "; code != 1 || !strings.HasPrefix(stderr, want) {
		t.Errorf("search of a closed port: exit %d, stderr %q, want it to start %q", code, stderr, want)
	}
}

// TestCatalogCmdsBadArguments checks that the catalog commands refuse bad
// arguments before they send anything, saying what is wrong.
func TestCatalogCmdsBadArguments(t *testing.T) {
	f := serveCatalog(t, nil)
	tests := []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"search", "--type", "rpm"}, `invalid argument "rpm" for "--type" flag: want kudo, olm, helm or plain`},
		{[]string{"search", "--format", "yaml"}, `invalid argument "yaml" for "--format" flag: want json or text`},
		{[]string{"search", "--sort", "popular"}, `invalid argument "popular" for "--sort" flag: want relevance, name or updated`},
		{[]string{"search", "--limit", "0"}, `--limit 0: want a number from 1 to 500`},
		{[]string{"search", "--limit", "501", "--all"}, `--limit 501: want a number from 1 to 500`},
		{[]string{"search", "--limit", "-3"}, `--limit -3: want a number from 1 to 500`},
		{[]string{"search", "--limit", "ten"}, `invalid argument "ten" for "--limit" flag`},
		{[]string{"search", "--verified=maybe"}, `invalid argument "maybe" for "--verified" flag: want true or false`},
		{[]string{"search", "--server", "ftp://berth.example.com"}, `invalid server "ftp://berth.example.com": scheme "ftp" is neither http nor https`},
		{[]string{"search", "--server", "localhost:5000/kudo"}, `invalid server "localhost:5000/kudo"`},
		{[]string{"show"}, `accepts 1 arg(s), received 0`},
		{[]string{"show", "kafka"}, `invalid package "kafka": missing namespace: want NS/NAME[:VERSION], e.g. kudo/kafka or kudo/kafka:1.0.0`},
		{[]string{"show", "localhost:5000/kudo/kafka"}, `invalid package "localhost:5000/kudo/kafka": too many '/' (the server is given by --server, not in the package name)`},
		{[]string{"show", "kudo/kafka:"}, `invalid package "kudo/kafka:": empty version after ':'`},
		{[]string{"show", "kudo/kafka:1.0.0/x"}, `invalid package "kudo/kafka:1.0.0/x": too many '/'`},
		{[]string{"show", "kudo/kafka:bad!version"}, `kudo/kafka: invalid: version "bad!version" is not a valid tag`},
		{[]string{"show", "Kudo/kafka"}, `Kudo/kafka: invalid: namespace "Kudo" must be lower case`},
		{[]string{"show", "kudo/kafka_"}, `kudo/kafka_: invalid: name "kafka_" is not a valid OCI path component`},
		{[]string{"upgrades", "kudo/kafka"}, `required flag(s) "from" not set`},
		{[]string{"upgrades", "kudo/kafka:1.0.0", "--from", "0.9.0"}, `invalid package "kudo/kafka:1.0.0": a version is not allowed here: want NS/NAME, e.g. kudo/kafka`},
		{[]string{"upgrades", "kafka", "--from", "0.9.0"}, `invalid package "kafka": missing namespace: want NS/NAME`},
		{[]string{"upgrades", "kudo/kafka", "--from", "0.9/0"}, `kudo/kafka: invalid: from: version "0.9/0" is not a valid tag`},
	}
	for _, tt := range tests {
		args := append(tt.args, "--server", f.host)
		if tt.args[0] == "search" && strings.HasPrefix(tt.want, "invalid server") {
			args = tt.args
		}
		code, stdout, stderr := berth(t, args...)
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, "Error: ") || !strings.Contains(stderr, tt.want) {
			t.Errorf("berth %s: exit %d\nstdout: %s\nstderr: %s\nwant the error to say: %s", strings.Join(tt.args, " "), code, stdout, stderr, tt.want)
		}
	}
	if reqs := f.requests(); len(reqs) > 0 {
		t.Errorf("bad arguments sent requests: %q", reqs)
	}
}

func TestTruncateAndClean(t *testing.T) {
	if got := truncate("héllo wörld", 7); got != "héllo…" {
		t.Errorf("truncate = %q", got)
	}
	if got := truncate("short", 60); got != "short" {
		t.Errorf("truncate = %q", got)
	}
	if got := clean(" a\tb\n\x1b]0;title\x07c\u202ed  "); got != "a b ]0;title c d" {
		t.Errorf("clean = %q", got)
	}
}
