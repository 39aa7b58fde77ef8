package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/distribution/distribution/v3"
	v2 "github.com/distribution/distribution/v3/registry/api/v2"
	"github.com/gorilla/mux"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// withContext serves reg with the request contexts that hook gives.
func withContext(t *testing.T, reg *Registry, hook func(context.Context) context.Context) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg.ServeHTTP(w, r.WithContext(hook(r.Context())))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestSignOnlyPushes(t *testing.T) {
	reg := newRegistry(t, Options{})
	open := httptest.NewServer(reg)
	t.Cleanup(open.Close)
	signer := withContext(t, reg, WithSignOnly)

	const repo = "team/app"
	version := manifest(t, open.URL, repo, "v1", berthPkg)
	if code, e := putManifest(t, open.URL, repo, "1.0", version); code != http.StatusCreated {
		t.Fatalf("push version: %d %v", code, e)
	}
	subject := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(version), Size: int64(len(version))}
	cosignTag := "sha256-" + subject.Digest.Encoded()

	// signature is a cosign-style signature manifest: no package.
	signature := func(content string, subj *ocispec.Descriptor) []byte {
		var m ocispec.Manifest
		if err := json.Unmarshal(manifest(t, open.URL, repo, content, image), &m); err != nil {
			t.Fatal(err)
		}
		m.Subject = subj
		b, _ := json.Marshal(m)
		return b
	}
	byDigest := func(b []byte) string { return digest.FromBytes(b).String() }
	sig, att, sbom := signature("sig", nil), signature("att", nil), signature("sbom", nil)
	referrer := signature("referrer", &subject)
	plain := signature("plain", nil)
	pkgUnderSig := manifest(t, open.URL, repo, "v2", berthPkg)
	chart := manifest(t, open.URL, repo, "chart", helmChart)

	for _, tc := range []struct {
		name, ref string
		body      []byte
		ok        bool
		message   string // in the refusal
	}{
		{"cosign signature tag", cosignTag + ".sig", sig, true, ""},
		{"cosign signature tag again", cosignTag + ".sig", att, true, ""},
		{"cosign attestation tag", cosignTag + ".att", att, true, ""},
		{"cosign SBOM tag", cosignTag + ".sbom", sbom, true, ""},
		{"referrer by digest", byDigest(referrer), referrer, true, ""},
		{"referrer under cosign tag", cosignTag + ".sig", referrer, true, ""},
		{"package under a signature tag", cosignTag + ".sig", pkgUnderSig, false, "package version"},
		{"helm chart under a signature tag", cosignTag + ".att", chart, false, "package version"},
		{"package by digest", byDigest(pkgUnderSig), pkgUnderSig, false, "package version"},
		{"version tag", "2.0", plain, false, "not tag 2.0"},
		{"existing version tag", "1.0", sig, false, "not tag 1.0"},
		{"referrer under a version tag", "3.0", referrer, false, "not tag 3.0"},
		{"plain manifest by digest", byDigest(plain), plain, false, "has a subject"},
		{"referrers tag schema", cosignTag, sig, false, "not tag"},
		{"other suffix", cosignTag + ".sig2", sig, false, "not tag"},
		{"short digest", "sha256-abc.sig", sig, false, "not tag"},
		{"uppercase digest", "sha256-" + strings.ToUpper(subject.Digest.Encoded()) + ".sig", sig, false, "not tag"},
		{"other algorithm", "sha384-" + subject.Digest.Encoded()[:48] + ".sig", sig, false, "not tag"},
		{"latest", "latest", sig, false, "not tag latest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, e := putManifest(t, signer.URL, repo, tc.ref, tc.body)
			if tc.ok {
				if code != http.StatusCreated {
					t.Fatalf("sign-only PUT %s: %d %v, want 201", tc.ref, code, e)
				}
				return
			}
			if code != http.StatusForbidden || len(e.Errors) != 1 || e.Errors[0].Code != "DENIED" || !strings.Contains(e.Errors[0].Message, tc.message) {
				t.Fatalf("sign-only PUT %s: %d %v, want 403 DENIED saying %q", tc.ref, code, e, tc.message)
			}
		})
	}
	if got := tagDigest(t, open.URL, repo, "1.0"); got != subject.Digest {
		t.Errorf("1.0 names %s after the refused pushes, want %s", got, subject.Digest)
	}
	// The same pushes without the mark are not refused for being unsigned.
	if code, e := putManifest(t, open.URL, repo, "2.0", plain); code != http.StatusCreated {
		t.Errorf("PUT 2.0 without sign-only: %d %v", code, e)
	}
}

// pageOf GETs a page of the catalog and returns its repositories and Link.
func pageOf(t *testing.T, base, query string) ([]string, string) {
	t.Helper()
	resp, err := http.Get(base + "/v2/_catalog" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var page struct {
		Repositories []string `json:"repositories"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &page) != nil || page.Repositories == nil {
		t.Fatalf("_catalog%s: %s %s", query, resp.Status, body)
	}
	return page.Repositories, resp.Header.Get("Link")
}

func TestFilteredCatalog(t *testing.T) {
	reg := newRegistry(t, Options{})
	open := httptest.NewServer(reg)
	t.Cleanup(open.Close)
	var all, even []string
	for i := range 12 {
		repo := fmt.Sprintf("ns%d/r%02d", i%2, i)
		putBlob(t, reg, repo, ocispec.MediaTypeImageLayer, []byte(repo))
		mustPut(t, reg, repo, "v1", pushBlobs(t, reg, repo).image(nil, "", "", nil))
		all = append(all, repo)
		if i%2 == 0 {
			even = append(even, repo)
		}
	}
	slices.Sort(all)
	keep := func(repo string) bool { return strings.HasPrefix(repo, "ns0/") }
	filtered := withContext(t, reg, func(ctx context.Context) context.Context { return WithRepositoryFilter(ctx, keep) })

	link := func(last string, n int) string {
		return fmt.Sprintf(`</v2/_catalog?last=%s&n=%d>; rel="next"`, url.QueryEscape(last), n)
	}
	for _, tc := range []struct {
		query string
		want  []string
		link  string
	}{
		{"", even, ""},
		{"?n=4", even[:4], link(even[3], 4)},
		{"?n=4&last=" + even[3], even[4:], ""},
		{"?n=2&last=" + even[3], even[4:], link(even[5], 2)},
		{"?n=6", even, link(even[5], 6)},
		{"?n=7", even, ""},
		{"?n=2&last=" + all[0], even[1:3], link(even[2], 2)},
		{"?n=2&last=ns1/r01", []string{}, ""},
		{"?n=2&last=ns0/r05", even[3:5], link(even[4], 2)},
		{"?n=0", []string{}, ""},
	} {
		got, gotLink := pageOf(t, filtered.URL, tc.query)
		if !slices.Equal(got, tc.want) || gotLink != tc.link {
			t.Errorf("filtered _catalog%s = %v %q, want %v %q", tc.query, got, gotLink, tc.want, tc.link)
		}
	}
	// Walking the pages by their Link finds every visible repository once.
	var walked []string
	for query := "?n=1"; query != ""; {
		page, l := pageOf(t, filtered.URL, query)
		walked = append(walked, page...)
		query = ""
		if l != "" {
			query = "?" + strings.TrimSuffix(strings.TrimPrefix(l, "</v2/_catalog?"), `>; rel="next"`)
		}
	}
	if !slices.Equal(walked, even) {
		t.Errorf("pages walked = %v, want %v", walked, even)
	}
	if got, _ := pageOf(t, open.URL, "?n=100"); !slices.Equal(got, all) {
		t.Errorf("unfiltered _catalog = %v, want %v", got, all)
	}
}

// countingNamespace lists repos as distribution's namespace does, counting
// the repositories it hands out.
type countingNamespace struct {
	distribution.Namespace
	repos  []string
	walked int
}

func (n *countingNamespace) Repositories(_ context.Context, buf []string, last string) (int, error) {
	i, _ := slices.BinarySearch(n.repos, last)
	if i < len(n.repos) && n.repos[i] == last {
		i++
	}
	got := copy(buf, n.repos[i:])
	n.walked += got
	if got < len(buf) {
		return got, io.EOF
	}
	return got, nil
}

func TestFilteredCatalogWalksOnce(t *testing.T) {
	inner := &countingNamespace{}
	for i := range 5000 {
		inner.repos = append(inner.repos, fmt.Sprintf("ns/r%05d", i))
	}
	ns := &guardedNamespace{Namespace: inner}
	for _, tc := range []struct {
		keep     func(string) bool
		n        int
		last     string
		want     []string
		wantErr  error
		maxWalks int
	}{
		{func(string) bool { return false }, 1000, "", nil, io.EOF, 5000},
		{func(r string) bool { return r == "ns/r04999" }, 1, "", []string{"ns/r04999"}, nil, 5000},
		{func(r string) bool { return r >= "ns/r04000" }, 3, "ns/r04100", []string{"ns/r04101", "ns/r04102", "ns/r04103"}, nil, 3},
		{func(r string) bool { return strings.HasSuffix(r, "0") }, 2, "ns/r04000", []string{"ns/r04010", "ns/r04020"}, nil, 20},
	} {
		inner.walked = 0
		buf := make([]string, tc.n)
		got, err := ns.Repositories(WithRepositoryFilter(context.Background(), tc.keep), buf, tc.last)
		if err != tc.wantErr || !slices.Equal(buf[:got], tc.want) || inner.walked > tc.maxWalks {
			t.Errorf("Repositories(n=%d, last=%q) = %v %v after walking %d, want %v %v within %d",
				tc.n, tc.last, buf[:got], err, inner.walked, tc.want, tc.wantErr, tc.maxWalks)
		}
	}
}

func TestParseRoute(t *testing.T) {
	const d = "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		method, path string
		want         Route
	}{
		{"GET", "/v2/", Route{Kind: RouteBase}},
		{"GET", "/v2", Route{Kind: RouteBase}},
		{"GET", "/v2/_catalog", Route{Kind: RouteCatalog}},
		{"GET", "/v2/a/b/c/tags/list", Route{Kind: RouteTags, Repository: "a/b/c"}},
		{"GET", "/v2/a/manifests/x/tags/list", Route{Kind: RouteTags, Repository: "a/manifests/x"}},
		{"PUT", "/v2/a/x/manifests/1.0", Route{Kind: RouteManifest, Repository: "a/x", Reference: "1.0"}},
		{"GET", "/v2/a/x/manifests/" + d, Route{Kind: RouteManifest, Repository: "a/x", Reference: d}},
		{"GET", "/v2/a/manifests/b/manifests/1.0", Route{Kind: RouteManifest, Repository: "a/manifests/b", Reference: "1.0"}},
		{"GET", "/v2/a/x/blobs/" + d, Route{Kind: RouteBlob, Repository: "a/x", Reference: d}},
		{"GET", "/v2/a/blobs/uploads/blobs/" + d, Route{Kind: RouteBlob, Repository: "a/blobs/uploads", Reference: d}},
		{"POST", "/v2/a/x/blobs/uploads/", Route{Kind: RouteUploadStart, Repository: "a/x"}},
		{"POST", "/v2/a/x/blobs/uploads", Route{Kind: RouteUploadStart, Repository: "a/x"}},
		{"PATCH", "/v2/a/x/blobs/uploads/1f2e-3d", Route{Kind: RouteUpload, Repository: "a/x", Reference: "1f2e-3d"}},
		{"GET", "/v2/a/x/referrers/" + d, Route{Kind: RouteReferrers, Repository: "a/x", Reference: d}},
		{"GET", "/v2/a/manifests/referrers/" + d, Route{Kind: RouteReferrers, Repository: "a/manifests", Reference: d}},
		{"GET", "/v2/a/x/manifests/bad:tag", Route{Kind: RouteManifest, Repository: "a/x", Reference: "bad:tag"}},
		{"GET", "/v2/a/x/manifests/bad@tag", Route{}},
		{"GET", "/v2/a/x/blobs/notadigest", Route{}},
		{"GET", "/v2/A/tags/list", Route{}},
		{"GET", "/v2/a/B/tags/list", Route{}},
		{"GET", "/v2/a/x", Route{}},
		{"GET", "/v3/a/x/tags/list", Route{}},
		{"GET", "/", Route{}},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		if got := ParseRoute(req); got != tc.want {
			t.Errorf("ParseRoute(%s %s) = %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

// TestQuickRouteAgreesWithTheRouter: wherever quickRoute answers, it answers
// as distribution's router does.
func TestQuickRouteAgreesWithTheRouter(t *testing.T) {
	const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	quick := map[RouteKind]int{}
	for _, name := range []string{"a", "a/b", "a/blobs/uploads", "a/manifests/b", "a/referrers", "a-b/c.d", "A", "a//b", "a/../b", "_a"} {
		for _, ref := range []string{d, "v1", "1.0.0-rc.1", "-x", "sha256:abc", "sha512:" + strings.Repeat("0", 128), "bad:tag", "x/y", "uploads", "uploads/", "",
			"3f1c2a9e-5b7d-4c8e-9f0a-1b2c3d4e5f60", "u_1.x=", "u:v", "u/v", "sha256:" + strings.Repeat("0", 64)} {
			for _, kind := range []string{"blobs", "manifests", "blobs/uploads"} {
				path := "/v2/" + name + "/" + kind + "/" + ref
				got, ok := quickRoute(path)
				if !ok {
					continue
				}
				quick[got.Kind]++
				req := httptest.NewRequest("GET", "http://x"+path, nil)
				req.URL.Path = path
				var m mux.RouteMatch
				want := Route{}
				if v2.Router().Match(req, &m) && m.Route != nil {
					want = Route{Kind: routeKinds[m.Route.GetName()], Repository: m.Vars["name"], Reference: m.Vars["reference"] + m.Vars["digest"] + m.Vars["uuid"]}
				}
				if got != want {
					t.Errorf("quickRoute(%s) = %+v, the router %+v", path, got, want)
				}
			}
		}
	}
	for _, k := range []RouteKind{RouteManifest, RouteBlob, RouteUploadStart, RouteUpload} {
		if quick[k] == 0 {
			t.Errorf("quickRoute answered no path of kind %d", k)
		}
	}
}
