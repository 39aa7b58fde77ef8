package mirror

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"
	"oras.land/oras-go/v2/registry/remote/credentials"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/pkgformat"
)

// resolveFakeCatalog is a CatalogReader over a few packages in memory. It records
// the searches and package reads it answers.
type resolveFakeCatalog struct {
	packages map[string]*apiv1.Package // by namespace/name
	// upgrades are the answers of Upgrades, by "namespace/name channel from".
	upgrades map[string]*apiv1.Upgrades
	// listed are more packages that searches find, which cannot be read.
	listed []apiv1.PackageSummary
	// searchErr, when set, is the answer of every search.
	searchErr error

	mu       sync.Mutex
	searches []client.SearchOptions
	reads    map[string]int
}

var _ CatalogReader = (*resolveFakeCatalog)(nil)

func (f *resolveFakeCatalog) SearchAll(_ context.Context, opts client.SearchOptions) (*apiv1.SearchResponse, error) {
	f.mu.Lock()
	f.searches = append(f.searches, opts)
	f.mu.Unlock()
	if f.searchErr != nil {
		return nil, f.searchErr
	}
	res := &apiv1.SearchResponse{}
	for _, p := range f.packages {
		if (opts.Namespace == "" || p.Namespace == opts.Namespace) && (opts.Format == "" || p.Format == opts.Format) {
			res.Packages = append(res.Packages, apiv1.PackageSummary{Namespace: p.Namespace, Name: p.Name, Format: p.Format, Version: p.LatestVersion})
		}
	}
	for _, p := range f.listed {
		if (opts.Namespace == "" || p.Namespace == opts.Namespace) && (opts.Format == "" || p.Format == opts.Format) {
			res.Packages = append(res.Packages, p)
		}
	}
	slices.SortFunc(res.Packages, func(a, b apiv1.PackageSummary) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Namespace, b.Namespace))
	})
	res.Total = len(res.Packages)
	return res, nil
}

func (f *resolveFakeCatalog) Package(_ context.Context, namespace, name string) (*apiv1.Package, error) {
	repo := namespace + "/" + name
	f.mu.Lock()
	if f.reads == nil {
		f.reads = map[string]int{}
	}
	f.reads[repo]++
	f.mu.Unlock()
	p, ok := f.packages[repo]
	if !ok {
		return nil, fmt.Errorf("%s: %w: no such package", repo, client.ErrNotFound)
	}
	return p, nil
}

func (f *resolveFakeCatalog) Upgrades(_ context.Context, namespace, name, from, channel string) (*apiv1.Upgrades, error) {
	repo := namespace + "/" + name
	if u, ok := f.upgrades[repo+" "+channel+" "+from]; ok {
		return u, nil
	}
	return nil, fmt.Errorf("%s: %w: version %s is not in channel %q", repo, client.ErrNotFound, from, channel)
}

// resolveFakePackage builds a package; versions are "1.0.0" or "1.0.0!" for an
// unverified one, in any order; channels are "name=v1,v2".
func resolveFakePackage(repo string, format pkgformat.Format, versions []string, channels ...string) *apiv1.Package {
	ns, name, _ := strings.Cut(repo, "/")
	p := &apiv1.Package{Namespace: ns, Name: name, Format: format}
	for _, v := range versions {
		unverified := strings.HasSuffix(v, "!")
		v = strings.TrimSuffix(v, "!")
		p.Versions = append(p.Versions, apiv1.VersionSummary{Version: v, Digest: resolveFakeDigest(repo, v).String(), Verified: !unverified})
	}
	slices.SortFunc(p.Versions, func(a, b apiv1.VersionSummary) int {
		return strings.Compare(pkgformat.VersionKey(b.Version), pkgformat.VersionKey(a.Version))
	})
	if len(p.Versions) > 0 {
		p.LatestVersion = p.Versions[0].Version
	}
	for _, c := range channels {
		cname, vs, _ := strings.Cut(c, "=")
		ch := apiv1.Channel{Name: cname, Versions: strings.Split(vs, ",")}
		ch.Head = ch.Versions[0]
		p.Channels = append(p.Channels, ch)
	}
	return p
}

func resolveFakeDigest(repo, version string) digest.Digest {
	return digest.FromString(repo + "@" + version)
}

func resolveNewFake() *resolveFakeCatalog {
	f := &resolveFakeCatalog{packages: map[string]*apiv1.Package{}, upgrades: map[string]*apiv1.Upgrades{}}
	for _, p := range []*apiv1.Package{
		resolveFakePackage("kudo/kafka", pkgformat.KUDO, []string{"1.0.0", "1.1.0!", "2.0.0", "2.1.0-rc.1", "1.2.0!"}),
		resolveFakePackage("kudo/cassandra", pkgformat.KUDO, []string{"3.11.7_0.9.0", "3.11.7_1.0.0", "4.0.0_1.1.0"}),
		resolveFakePackage("olm/etcd", pkgformat.OLM, []string{"0.9.0", "0.9.2", "0.9.4", "1.0.0"},
			"alpha=0.9.4,0.9.2,0.9.0", "stable=1.0.0,0.9.4"),
		resolveFakePackage("olm/kafka", pkgformat.OLM, []string{"0.30.0", "0.31.0"}, "stable=0.31.0,0.30.0"),
		resolveFakePackage("charts/nginx", pkgformat.Helm, []string{"15.0.0", "15.1.0+build.1"}),
		resolveFakePackage("charts/empty", pkgformat.Helm, nil),
	} {
		f.packages[p.Namespace+"/"+p.Name] = p
	}
	f.upgrades["olm/etcd alpha 0.9.0"] = &apiv1.Upgrades{From: "0.9.0", Channel: "alpha", Head: "0.9.4", Next: []string{"0.9.2"}, Path: []string{"0.9.2", "0.9.4"}}
	f.upgrades["olm/etcd stable 0.9.4"] = &apiv1.Upgrades{From: "0.9.4", Channel: "stable", Head: "1.0.0", Next: []string{"1.0.0"}, Path: []string{"1.0.0"}}
	f.upgrades["olm/etcd stable 1.0.0"] = &apiv1.Upgrades{From: "1.0.0", Channel: "stable", Head: "1.0.0"}
	f.upgrades["olm/kafka stable 0.30.0"] = &apiv1.Upgrades{From: "0.30.0", Channel: "stable", Head: "0.31.0", Path: []string{"0.30.1", "0.31.0"}}
	return f
}

// resolveNames lists a resolution's versions as "namespace/name@version".
func resolveNames(res *Resolution) []string {
	out := make([]string, len(res.Versions))
	for i, s := range res.Versions {
		out[i] = s.Repository() + "@" + s.Version
	}
	return out
}

func TestResolve(t *testing.T) {
	for _, tt := range []struct {
		name, selection string
		want            []string
		warnings        []string
		// searches are the namespace and format of each search, "ns:format".
		searches []string
	}{
		{
			name:      "namespace",
			selection: "packages:\n  - namespace: kudo\n",
			want: []string{
				"kudo/cassandra@4.0.0_1.1.0", "kudo/cassandra@3.11.7_1.0.0", "kudo/cassandra@3.11.7_0.9.0",
				"kudo/kafka@2.1.0-rc.1", "kudo/kafka@2.0.0", "kudo/kafka@1.2.0", "kudo/kafka@1.1.0", "kudo/kafka@1.0.0",
			},
			searches: []string{"kudo:"},
		},
		{
			name:      "glob with a literal namespace",
			selection: "packages:\n  - repository: olm/*\n",
			want:      []string{"olm/etcd@1.0.0", "olm/etcd@0.9.4", "olm/etcd@0.9.2", "olm/etcd@0.9.0", "olm/kafka@0.31.0", "olm/kafka@0.30.0"},
			searches:  []string{"olm:"},
		},
		{
			name:      "glob over every namespace",
			selection: "packages:\n  - repository: \"*/kafka\"\n    latest: 1\n",
			want:      []string{"kudo/kafka@2.1.0-rc.1", "olm/kafka@0.31.0"},
			searches:  []string{":"},
		},
		{
			name:      "namespace and glob",
			selection: "packages:\n  - namespace: kudo\n    repository: \"kudo/c*\"\n    latest: 1\n",
			want:      []string{"kudo/cassandra@4.0.0_1.1.0"},
			searches:  []string{"kudo:"},
		},
		{
			name:      "versions range leaves out pre-releases and reads '_' as '+'",
			selection: "packages:\n  - repository: kudo/kafka\n    versions: \">=1.1.0 <3\"\n  - repository: kudo/cassandra\n    versions: \"~3.11\"\n",
			want:      []string{"kudo/cassandra@3.11.7_1.0.0", "kudo/cassandra@3.11.7_0.9.0", "kudo/kafka@2.0.0", "kudo/kafka@1.2.0", "kudo/kafka@1.1.0"},
		},
		{
			name:      "latest after versions",
			selection: "packages:\n  - repository: kudo/kafka\n    versions: \"<2.0.0\"\n    latest: 2\n",
			want:      []string{"kudo/kafka@1.2.0", "kudo/kafka@1.1.0"},
		},
		{
			name:      "channel",
			selection: "packages:\n  - repository: olm/etcd\n    channel: alpha\n",
			want:      []string{"olm/etcd@0.9.4", "olm/etcd@0.9.2", "olm/etcd@0.9.0"},
		},
		{
			name:      "channel and latest",
			selection: "packages:\n  - repository: olm/etcd\n    channel: alpha\n    latest: 1\n",
			want:      []string{"olm/etcd@0.9.4"},
		},
		{
			name:      "upgrade path",
			selection: "packages:\n  - repository: olm/etcd\n    channel: alpha\n    from: 0.9.0\n  - repository: olm/etcd\n    channel: stable\n    from: 1.0.0\n",
			want:      []string{"olm/etcd@1.0.0", "olm/etcd@0.9.4", "olm/etcd@0.9.2", "olm/etcd@0.9.0"},
		},
		{
			name:      "upgrade path through a version that is not readable",
			selection: "packages:\n  - repository: olm/kafka\n    channel: stable\n    from: 0.30.0\n",
			want:      []string{"olm/kafka@0.31.0", "olm/kafka@0.30.0"},
			warnings: []string{`rule 1 (repository "olm/kafka"): the upgrade path of olm/kafka from 0.30.0 in channel "stable" goes through 1 version ` +
				`the package does not have as readable versions, left out: 0.30.1`},
		},
		{
			name:      "selection formats",
			selection: "packages:\n  - repository: \"*/kafka\"\n  - namespace: charts\nformats: [olm]\n",
			want:      []string{"olm/kafka@0.31.0", "olm/kafka@0.30.0"},
			warnings:  []string{`rule 2 (namespace "charts"): no package of format olm matches`},
			searches:  []string{":olm", "charts:olm"},
		},
		{
			name:      "rule formats within the selection's",
			selection: "packages:\n  - repository: \"*/kafka\"\n    formats: [kudo, helm]\n    latest: 1\nformats: [kudo, olm]\n",
			want:      []string{"kudo/kafka@2.1.0-rc.1"},
			searches:  []string{":kudo"},
		},
		{
			name:      "several formats are filtered here",
			selection: "packages:\n  - repository: \"*/*\"\n    latest: 1\n    formats: [kudo, helm]\n",
			want:      []string{"charts/nginx@15.1.0+build.1", "kudo/cassandra@4.0.0_1.1.0", "kudo/kafka@2.1.0-rc.1"},
			warnings:  []string{`rule 1 (repository "*/*"): selects no version of charts/empty`},
			searches:  []string{":"},
		},
		{
			name:      "verifiedOnly",
			selection: "packages:\n  - repository: kudo/kafka\n    versions: \"<2\"\nverifiedOnly: true\n",
			want:      []string{"kudo/kafka@1.0.0"},
			warnings:  []string{`rule 1 (repository "kudo/kafka"): verifiedOnly dropped 2 unverified versions of kudo/kafka: 1.2.0, 1.1.0`},
		},
		{
			name:      "union once each",
			selection: "packages:\n  - repository: kudo/kafka\n    latest: 2\n  - namespace: kudo\n    versions: \">=2 <3\"\n  - repository: \"kudo/*\"\n    latest: 1\n",
			want:      []string{"kudo/cassandra@4.0.0_1.1.0", "kudo/kafka@2.1.0-rc.1", "kudo/kafka@2.0.0"},
			warnings:  []string{`rule 2 (namespace "kudo"): selects no version of kudo/cassandra`},
			searches:  []string{"kudo:"},
		},
		{
			name:      "nothing matches",
			selection: "packages:\n  - repository: \"nope/*\"\n  - repository: kudo/kafka\n    versions: \">=9\"\n  - repository: \"olm/z*\"\n",
			warnings: []string{
				`rule 1 (repository "nope/*"): no package matches`,
				`rule 2 (repository "kudo/kafka"): selects no version of kudo/kafka`,
				`rule 3 (repository "olm/z*"): no package matches`,
			},
			searches: []string{"nope:", "kudo:", "olm:"},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := ParseSelection([]byte(tt.selection))
			if err != nil {
				t.Fatal(err)
			}
			cat := resolveNewFake()
			res, err := Resolve(context.Background(), cat, sel)
			if err != nil {
				t.Fatal(err)
			}
			if got := resolveNames(res); !slices.Equal(got, tt.want) {
				t.Errorf("versions:\n got %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(res.Warnings, tt.warnings) {
				t.Errorf("warnings:\n got %q\nwant %q", res.Warnings, tt.warnings)
			}
			if tt.searches != nil {
				var got []string
				for _, o := range cat.searches {
					got = append(got, o.Namespace+":"+string(o.Format))
				}
				if !slices.Equal(got, tt.searches) {
					t.Errorf("searches: got %q, want %q", got, tt.searches)
				}
			}
			for repo, n := range cat.reads {
				if n != 1 {
					t.Errorf("%s was read %d times, want once", repo, n)
				}
			}
		})
	}
}

func TestResolveSelected(t *testing.T) {
	sel := &Selection{Packages: []Rule{{Repository: "charts/nginx", Latest: 1}, {Repository: "kudo/kafka", Versions: "1.1.0"}}}
	res, err := Resolve(context.Background(), resolveNewFake(), sel)
	if err != nil {
		t.Fatal(err)
	}
	want := []Selected{
		{Namespace: "charts", Name: "nginx", Version: "15.1.0+build.1", Tag: "15.1.0_build.1", Digest: resolveFakeDigest("charts/nginx", "15.1.0+build.1"), Format: "helm", Verified: true},
		{Namespace: "kudo", Name: "kafka", Version: "1.1.0", Tag: "1.1.0", Digest: resolveFakeDigest("kudo/kafka", "1.1.0"), Format: "kudo", Verified: false},
	}
	if !slices.Equal(res.Versions, want) {
		t.Errorf("Versions:\n got %+v\nwant %+v", res.Versions, want)
	}
	if got := res.Versions[0].Repository(); got != "charts/nginx" {
		t.Errorf("Repository() = %q", got)
	}
}

func TestResolveErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		sel  *Selection
		// edit changes the catalog.
		edit func(*resolveFakeCatalog)
		want string
		is   error
	}{
		{
			name: "invalid selection",
			sel:  &Selection{},
			want: "selection: no rules: packages must list at least one rule (namespace: NAME or repository: GLOB)",
		},
		{
			name: "unknown channel",
			sel:  &Selection{Packages: []Rule{{Namespace: "kudo"}, {Repository: "olm/etcd", Channel: "beta"}}},
			want: `rule 2 (repository "olm/etcd"): channel: olm/etcd has no channel "beta" (its channels: alpha, stable)`,
		},
		{
			name: "a channel of a package without channels",
			sel:  &Selection{Packages: []Rule{{Repository: "kudo/kafka", Channel: "stable"}}},
			want: `rule 1 (repository "kudo/kafka"): channel: kudo/kafka has no channel "stable": it has no channels`,
		},
		{
			name: "from not in the channel",
			sel:  &Selection{Packages: []Rule{{Repository: "olm/etcd", Channel: "stable", From: "0.9.0"}}},
			want: `rule 1 (repository "olm/etcd"): upgrade path of olm/etcd from 0.9.0 in channel "stable": olm/etcd: not found: version 0.9.0 is not in channel "stable"`,
			is:   client.ErrNotFound,
		},
		{
			name: "search fails",
			sel:  &Selection{Packages: []Rule{{Namespace: "kudo"}}},
			edit: func(f *resolveFakeCatalog) { f.searchErr = fmt.Errorf("search: %w: go away", client.ErrDenied) },
			want: `rule 1 (namespace "kudo"): search: denied: go away`,
			is:   client.ErrDenied,
		},
		{
			name: "package gone between search and read",
			sel:  &Selection{Packages: []Rule{{Repository: "olm/*"}}},
			edit: func(f *resolveFakeCatalog) {
				f.listed = []apiv1.PackageSummary{{Namespace: "olm", Name: "gone", Format: pkgformat.OLM}}
			},
			want: `rule 1 (repository "olm/*"): olm/gone: not found: no such package`,
			is:   client.ErrNotFound,
		},
		{
			name: "bad digest",
			sel:  &Selection{Packages: []Rule{{Repository: "kudo/kafka", Latest: 1}}},
			edit: func(f *resolveFakeCatalog) { f.packages["kudo/kafka"].Versions[0].Digest = "sha256:nope" },
			want: `rule 1 (repository "kudo/kafka"): kudo/kafka 2.1.0-rc.1: the catalog gave digest "sha256:nope": invalid checksum digest length`,
			is:   digest.ErrDigestInvalidLength,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cat := resolveNewFake()
			if tt.edit != nil {
				tt.edit(cat)
			}
			res, err := Resolve(context.Background(), cat, tt.sel)
			if err == nil {
				t.Fatalf("Resolve = %q, want an error", resolveNames(res))
			}
			if err.Error() != tt.want {
				t.Errorf("error:\n got %s\nwant %s", err, tt.want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %q does not wrap %v", err, tt.is)
			}
		})
	}
}

// TestResolveOverHTTP resolves through client.Catalog against a server
// that answers the catalog API from a resolveFakeCatalog, one package a page, so
// that the queries, cursors and documents are the wire's.
func TestResolveOverHTTP(t *testing.T) {
	fake := resolveNewFake()
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		write := func(status int, v any) {
			w.Header().Set("Content-Type", apiv1.MediaTypeJSON)
			w.WriteHeader(status)
			json.NewEncoder(w).Encode(v)
		}
		fail := func(err error) {
			write(http.StatusNotFound, apiv1.Errors{Errors: []apiv1.Error{{Code: "NOT_FOUND", Message: err.Error()}}})
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/api/v1/packages")
		if !ok {
			http.NotFound(w, r)
			return
		}
		parts := strings.Split(strings.TrimPrefix(rest, "/"), "/")
		switch {
		case rest == "":
			mu.Lock()
			queries = append(queries, r.URL.RawQuery)
			mu.Unlock()
			res, _ := fake.SearchAll(r.Context(), client.SearchOptions{Namespace: q.Get("namespace"), Format: pkgformat.Format(q.Get("format"))})
			at, _ := strconv.Atoi(q.Get("cursor"))
			page := apiv1.SearchResponse{Packages: res.Packages[at:min(at+1, len(res.Packages))], Total: res.Total}
			if at+1 < len(res.Packages) {
				page.Next = strconv.Itoa(at + 1)
			}
			write(http.StatusOK, page)
		case len(parts) == 2:
			p, err := fake.Package(r.Context(), parts[0], parts[1])
			if err != nil {
				fail(err)
				return
			}
			write(http.StatusOK, p)
		case len(parts) == 3 && parts[2] == "upgrades":
			u, err := fake.Upgrades(r.Context(), parts[0], parts[1], q.Get("from"), q.Get("channel"))
			if err != nil {
				fail(err)
				return
			}
			write(http.StatusOK, u)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	cat, err := client.NewCatalog(srv.URL, client.Options{Credentials: credentials.NewMemoryStore(), HTTPClient: &http.Client{}})
	if err != nil {
		t.Fatal(err)
	}
	sel, err := ParseSelection([]byte(`
packages:
  - repository: "*/kafka"
    latest: 1
  - namespace: olm
    repository: olm/etcd
    channel: alpha
    from: 0.9.0
  - namespace: charts
    formats: [helm]
verifiedOnly: true
`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Resolve(context.Background(), cat, sel)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"charts/nginx@15.1.0+build.1", "charts/nginx@15.0.0", "kudo/kafka@2.1.0-rc.1", "olm/etcd@0.9.4", "olm/etcd@0.9.2", "olm/etcd@0.9.0", "olm/kafka@0.31.0"}
	if got := resolveNames(res); !slices.Equal(got, want) {
		t.Errorf("versions:\n got %q\nwant %q", got, want)
	}
	if want := []string{`rule 3 (namespace "charts"): selects no version of charts/empty`}; !slices.Equal(res.Warnings, want) {
		t.Errorf("warnings: got %q, want %q", res.Warnings, want)
	}
	if len(queries) == 0 || !strings.Contains(queries[len(queries)-1], "format=helm") || !strings.Contains(queries[len(queries)-1], "namespace=charts") {
		t.Errorf("searches sent %q, want the last for namespace charts and format helm", queries)
	}

	sel.Packages = []Rule{{Repository: "olm/etcd", Channel: "stable", From: "0.9.0"}}
	_, err = Resolve(context.Background(), cat, sel)
	if !errors.Is(err, client.ErrNotFound) || !strings.HasPrefix(err.Error(), `rule 1 (repository "olm/etcd"): upgrade path of olm/etcd from 0.9.0 in channel "stable": olm/etcd: not found: `) {
		t.Errorf("Resolve from a version not in the channel: %v, want the rule and the API's not found", err)
	}
}
