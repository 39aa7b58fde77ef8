package ui_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/ui"
)

// hostile is a Helm chart whose every text tries to break out of the page.
var hostile = map[string]string{
	"Chart.yaml": `apiVersion: v2
name: evil
version: 1.0.0
appVersion: "<b>1</b>"
description: "<script>alert('description')</script> javascript:alert(1)"
keywords: ["<img src=x onerror=alert(1)>"]
maintainers:
  - name: "</td><script>alert('maintainer')</script>"
    email: "a@example.com"
`,
	"README.md":                 "# Evil\n\n<script>alert('readme')</script>\n\n[click](javascript:alert('link'))\n\n<img src=x onerror=alert(1)>\n\n<div style=\"color:red\">styled</div>\n\nInline <script>alert('inline')</script> and <style>body{display:none}</style> text.\n",
	"templates/deployment.yaml": "kind: ConfigMap\nmetadata:\n  name: x\n",
	"files/evil.svg":            `<svg xmlns="http://www.w3.org/2000/svg"></svg><script>alert('svg')</script>`,
	"files/page.html":           `<html><body onload="alert(1)"><script>alert('html')</script></body></html>`,
	"files/big.yaml":            strings.Repeat("key: value # <script>\n", (2<<20)/21),
	"files/blob.bin":            "\x00\x01\x02<script>alert('bin')</script>",
}

// populated is an env holding a KUDO, an OLM, a Helm and a plain package,
// and the hostile chart, in namespaces kudo, community, charts, plain, evil.
func populated(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	for _, v := range []string{"3.11.5-0.1.2", "3.11.6-1.0.0", "3.11.6-1.0.1"} {
		e.push("kudo", load(t, "kudo/cassandra/"+v))
	}
	for _, p := range loadRepository(t, "olm-community/etcd") {
		e.push("community", p)
	}
	e.push("charts", build(t, "", "", map[string]string{
		"Chart.yaml":              "apiVersion: v2\nname: nginx\nversion: 1.2.3\nappVersion: \"1.25\"\ndescription: A web server.\n",
		"templates/service.yaml":  "apiVersion: v1\nkind: Service\nmetadata:\n  name: nginx\n",
		"README.md":               "# nginx\n\nA **web** server. See [docs](https://nginx.org).\n",
		"templates/_helpers.tpl":  "{{/* helpers */}}\n",
		"values.yaml":             "replicas: 1\n",
		"templates/configmap.yml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n",
	}))
	e.push("plain", build(t, "hello", "0.1.0", map[string]string{
		"manifests/deployment.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: hello\n",
	}))
	e.push("evil", build(t, "", "", hostile))
	return e
}

func TestEveryPageRenders(t *testing.T) {
	e := populated(t)
	h := newUI(e, ui.Options{})
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{"cassandra", "etcd", "nginx", "hello", "5 packages."}},
		{"/?q=etcd&format=olm", []string{"etcd", `aria-current="true"`}},
		{"/?sort=updated&verified=false", []string{"cassandra"}},
		{"/ui/namespaces/kudo", []string{"cassandra", "Namespace kudo"}},
		{"/ui/packages/kudo/cassandra", []string{"3.11.6_1.0.1", "kubectl kudo repo add berth-kudo http://example.com/kudo",
			"kubectl kudo install cassandra --repo berth-kudo --operator-version 1.0.1 --app-version 3.11.6", `role="img"`, "semver", `class="edge semver widens"`, "widens permissions</strong>"}},
		{"/ui/packages/community/etcd", []string{"CatalogSource", "reference: example.com/community/olm/catalog:latest", "args: [serve, /catalog/configs]",
			"address: berth-community.olm.svc:50051", "kind: Subscription",
			"source: berth-community", `role="img"`, "<details>", "replaces"}},
		{"/ui/packages/community/etcd?channel=clusterwide-alpha", []string{`aria-current="page" class="selected">clusterwide-alpha`}},
		{"/ui/packages/charts/nginx", []string{"helm install nginx oci://example.com/charts/nginx --version 1.2.3", "<strong>web</strong>",
			`rel="nofollow noopener noreferrer"`, "oras pull example.com/charts/nginx:1.2.3"}},
		{"/ui/packages/plain/hello", []string{"kubectl apply -R -f hello/manifests", "berth pull example.com/plain/hello:0.1.0"}},
		{"/ui/packages/kudo/cassandra/versions/3.11.6_1.0.1", []string{"Permissions", "operator.yaml", "Rating", "Since 3.11.6_1.0.0"}},
		{"/ui/packages/community/etcd/versions/0.9.4", []string{"EtcdCluster", "Example EtcdCluster", "&#34;kind&#34;: &#34;EtcdCluster&#34;",
			"startingCSV: etcdoperator.v0.9.4", "In its namespace", "may read Secrets", "example.com/community/etcd@sha256:"}},
		{"/ui/packages/community/etcd/versions/0.9.2-clusterwide", []string{"channel: clusterwide-alpha", "startingCSV: etcdoperator.v0.9.2-clusterwide",
			"kind: ClusterExtension", "ref: example.com/community/olm/catalog:latest", "version: 0.9.2-clusterwide", "channels: [clusterwide-alpha]",
			"olm.operatorframework.io/metadata.name: berth-community"}},
		{"/ui/packages/charts/nginx/versions/1.2.3", []string{"values.yaml", "Chart.yaml", "no RBAC permissions"}},
		{"/ui/packages/charts/nginx/versions/1.2.3/files/values.yaml", []string{`class="chroma"`, "replicas", `class="ln"`}},
		{"/ui/packages/kudo/cassandra/versions/3.11.6_1.0.1/files/operator.yaml", []string{`class="chroma"`}},
		{"/ui/login", []string{"Authentication is off"}},
	} {
		resp, body := get(t, h, tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d, body %.300s", tc.path, resp.StatusCode, body)
			continue
		}
		checkPage(t, tc.path, resp, body)
		for _, w := range tc.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: no %q in the page", tc.path, w)
			}
		}
	}
}

// inlineStyleOrScript finds what the CSP would refuse: inline scripts, event
// handler attributes, style elements and attributes.
var inlineStyleOrScript = regexp.MustCompile(`(?i)<script(?:\s[^>]*)?>[^<]|<script>|<[^>]*\sstyle=|<style|<[^>]*\son[a-z]+=`)

// checkPage checks what every page of the UI must have: its headers, and no
// inline script or style.
// serverTiming is the form of the pages' Server-Timing header.
var serverTiming = regexp.MustCompile(`^page;dur=[0-9]+\.[0-9]{3}$`)

func checkPage(t *testing.T, path string, resp *http.Response, body string) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": ui.ContentSecurityPolicy,
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "same-origin",
		"Content-Type":            "text/html; charset=utf-8",
	} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s: %s %q, want %q", path, k, got, want)
		}
	}
	if !serverTiming.MatchString(resp.Header.Get("Server-Timing")) {
		t.Errorf("%s: Server-Timing %q, want page;dur=MILLISECONDS", path, resp.Header.Get("Server-Timing"))
	}
	if !strings.Contains(ui.ContentSecurityPolicy, "default-src 'none'") || strings.Contains(ui.ContentSecurityPolicy, "unsafe") {
		t.Errorf("CSP %q is not strict", ui.ContentSecurityPolicy)
	}
	if m := inlineStyleOrScript.FindString(body); m != "" {
		t.Errorf("%s: inline script or style %q", path, m)
	}
	for _, w := range []string{`<html lang="en">`, `class="skip" href="#main"`, `<main id="main"`, "<h1"} {
		if !strings.Contains(body, w) {
			t.Errorf("%s: no %q", path, w)
		}
	}
}

func TestHostilePackageIsEscaped(t *testing.T) {
	e := populated(t)
	h := newUI(e, ui.Options{})
	for _, path := range []string{
		"/", "/?q=evil", "/ui/namespaces/evil", "/ui/packages/evil/evil", "/ui/packages/evil/evil/versions/1.0.0",
		"/ui/packages/evil/evil/versions/1.0.0/files/files/evil.svg",
		"/ui/packages/evil/evil/versions/1.0.0/files/files/page.html",
		"/ui/packages/evil/evil/versions/1.0.0/files/README.md",
		"/ui/packages/evil/evil/versions/1.0.0/files/files/big.yaml",
		"/ui/packages/evil/evil/versions/1.0.0/files/files/blob.bin",
	} {
		resp, body := get(t, h, path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", path, resp.StatusCode)
			continue
		}
		checkPage(t, path, resp, body)
		for _, bad := range []string{"<script>alert", `href="javascript:`, "<img src=x", "</svg><script", `onload="alert`, "<b>1</b>"} {
			if strings.Contains(body, bad) {
				t.Errorf("%s: %q unescaped", path, bad)
			}
		}
	}
	_, body := get(t, h, "/ui/packages/evil/evil")
	for _, w := range []string{"&lt;script&gt;alert(&#39;description&#39;)&lt;/script&gt;", "raw HTML omitted", `<a href="" rel="nofollow noopener noreferrer">click</a>`, "Inline"} {
		if !strings.Contains(body, w) {
			t.Errorf("package page: no %q", w)
		}
	}
	// The README's script and style are dropped with what they hold.
	for _, bad := range []string{"inline&#39;", "inline'", "display:none"} {
		if strings.Contains(body, bad) {
			t.Errorf("package page: the README shows %q", bad)
		}
	}
	_, body = get(t, h, "/ui/packages/evil/evil/versions/1.0.0/files/files/big.yaml")
	if !strings.Contains(body, "KiB are shown") || !strings.Contains(body, `href="/ui/packages/evil/evil/versions/1.0.0/download/files/big.yaml"`) {
		t.Errorf("big file: no truncation notice or download link")
	}
	if len(body) > 40<<20 {
		t.Errorf("big file: page of %d bytes", len(body))
	}
	_, body = get(t, h, "/ui/packages/evil/evil/versions/1.0.0/files/files/blob.bin")
	if !strings.Contains(body, "Binary file, 32 bytes") || strings.Contains(body, "chroma") {
		t.Errorf("binary file: %s", body)
	}
}

// denyEvil is an Authorizer that lets the viewer pull everything but evil/*.
type denyEvil struct{ catalog.AllowAll }

func (denyEvil) Pullable(context.Context) (catalog.Access, error) {
	return catalog.Access{Pull: func(ns, _ string) bool { return ns != "evil" }}, nil
}

func TestForbiddenIsNotFound(t *testing.T) {
	e := populated(t)
	h := newUI(e, ui.Options{Authorizer: denyEvil{}})
	_, unknown := get(t, h, "/ui/packages/nowhere/nothing")
	for _, path := range []string{
		"/ui/packages/evil/evil", "/ui/packages/evil/evil/versions/1.0.0",
		"/ui/packages/evil/evil/versions/1.0.0/files/Chart.yaml",
	} {
		resp, body := get(t, h, path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, resp.StatusCode)
		}
		if body != unknown {
			t.Errorf("%s: the 404 page differs from an unknown package's", path)
		}
	}
	for _, path := range []string{"/", "/?q=evil", "/ui/namespaces/evil"} {
		_, body := get(t, h, path)
		if strings.Contains(body, "/ui/packages/evil/") || strings.Contains(body, ">evil<") {
			t.Errorf("%s: shows the forbidden package", path)
		}
	}
}

func TestBadParameters(t *testing.T) {
	h := newUI(newEnv(t), ui.Options{})
	for _, tc := range []struct{ path, param string }{
		{"/?format=rpm", "format"},
		{"/?verified=maybe", "verified"},
		{"/?sort=random", "sort"},
		{"/?kubeVersion=latest", "kubeVersion"},
		{"/?provides=a/", "provides"},
		{"/?image=quay.io/org/img@@x", "image"},
		{"/?cursor=xyz", "cursor"},
		{"/?namespace=Bad_NS", "namespace"},
		{"/?nope=1", "nope"},
		{"/ui/namespaces/kudo?namespace=other", "namespace"},
		{"/ui/packages/Bad_NS/x", "namespace"},
		{"/ui/packages/a/b/versions/1.0.0/files/a/../Chart.yaml", "path"},
		{"/ui/packages/a/b/versions/1.0.0/download/a/../Chart.yaml", "path"},
		{"/ui/packages/a/b/versions/1.0.0/download/%2FChart.yaml", "path"},
		{"/ui/packages/a/b/versions/1.0.0/download/a//Chart.yaml", "path"},
		{"/ui/packages/a/b/versions/1.0.0/download/Chart.yaml%00", "path"},
	} {
		resp, body := get(t, h, tc.path)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", tc.path, resp.StatusCode)
			continue
		}
		checkPage(t, tc.path, resp, body)
		if !strings.Contains(body, "parameter &#34;"+tc.param+"&#34;") {
			t.Errorf("%s: the page does not name %s: %s", tc.path, tc.param, body)
		}
	}
}

func TestNotFoundPages(t *testing.T) {
	h := newUI(newEnv(t), ui.Options{})
	for _, path := range []string{"/ui/nothing", "/ui/packages/a/b", "/ui/packages/a/b/versions/1.0.0", "/ui/static/none.css"} {
		resp, body := get(t, h, path)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", path, resp.StatusCode)
		}
		checkPage(t, path, resp, body)
	}
}

func TestStaticAssets(t *testing.T) {
	h := newUI(newEnv(t), ui.Options{})
	_, page := get(t, h, "/")
	for _, name := range []string{"style.css", "ui.js"} {
		m := regexp.MustCompile(`/ui/static/` + regexp.QuoteMeta(name) + `\?v=[0-9a-f]+`).FindString(page)
		if m == "" {
			t.Fatalf("the page does not link %s", name)
		}
		resp, body := get(t, h, m)
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") || body == "" {
			t.Errorf("%s: status %d, Cache-Control %q", m, resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		if resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: no CSP", m)
		}
	}
	_, css := get(t, h, "/ui/static/style.css")
	if !strings.Contains(css, "prefers-color-scheme: dark") || !strings.Contains(css, ".chroma") {
		t.Errorf("the stylesheet lacks the dark theme or the highlighting classes")
	}
}

func TestSearchPagination(t *testing.T) {
	e := populated(t)
	h := newUI(e, ui.Options{})
	_, body := get(t, h, "/?limit=2&sort=name")
	if !strings.Contains(body, "Packages 1–2 of 5.") || !strings.Contains(body, `rel="next"`) || strings.Contains(body, `rel="prev"`) {
		t.Fatalf("first page: %s", body)
	}
	next := regexp.MustCompile(`href="([^"]+)" rel="next"`).FindStringSubmatch(body)[1]
	_, body = get(t, h, strings.ReplaceAll(next, "&amp;", "&"))
	if !strings.Contains(body, "Packages 3–4 of 5.") || !strings.Contains(body, `rel="prev"`) {
		t.Errorf("second page: %s", body)
	}
}

// TestVersionPageReviewFirst: a version's page shows its permissions
// rating and findings before anything else, the install commands included,
// so that a reviewer reads them first.
func TestVersionPageReviewFirst(t *testing.T) {
	e := newEnv(t)
	for _, p := range loadRepository(t, "olm-community/etcd") {
		e.push("community", p)
	}
	e.push("kudo", load(t, "kudo/cassandra/3.11.6-1.0.1"))
	h := newUI(e, ui.Options{})
	for _, path := range []string{
		"/ui/packages/community/etcd/versions/0.9.4",
		"/ui/packages/community/etcd/versions/0.9.2-clusterwide",
		"/ui/packages/kudo/cassandra/versions/3.11.6_1.0.1",
	} {
		resp, body := get(t, h, path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		section, rating := strings.Index(body, `<h2 id="perm-h">`), strings.Index(body, `<p>Rating: `)
		if section < 0 || rating < 0 {
			t.Errorf("%s: no permissions rating", path)
			continue
		}
		if first := strings.Index(body, "<h2"); first != section {
			t.Errorf("%s: the first section is %.40q, not the permissions", path, body[first:])
		}
		// The review ends with its findings, when there are any.
		review := max(rating, strings.Index(body, `<ul class="findings">`))
		for _, later := range []string{`<h2 id="meta-h">`, `<h2 id="install-h">`, `<pre`} {
			if i := strings.Index(body, later); i < review {
				t.Errorf("%s: %s (at %d) before the rating and findings (at %d)", path, later, i, review)
			}
		}
	}
}
