package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/browsertest"
)

// screenshotsEnv, set to 1, makes TestUIBrowser save a screenshot of each
// page type to docs/ui/.
const screenshotsEnv = "BERTH_UI_SCREENSHOTS"

// The packages of the browser tests' server.
const (
	signedKafka = "2.5.1_1.3.2"              // a/kafka's version signed with cosign
	etcdCluster = "0.9.4-clusterwide"        // head of a/etcd's channel clusterwide-alpha
	cassandra   = "/ui/packages/b/cassandra" // bob's: alice must not see it
	cassandraV  = cassandra + "/versions/3.11.6_1.0.1"
	etcdPage    = "/ui/packages/a/etcd"
	kafkaPage   = "/ui/packages/a/kafka"
)

// startUISite starts the server the browser tests look at: auth on, with
// alice's team owning a/ and bob b/, and a trust policy with a cosign key
// for a/, which has a quota of 1 GiB (its page shows its storage against
// it). Alice pushes a/kafka (KUDO, two versions, signedKafka signed with
// the real cosign) and a/etcd (OLM, six versions in three channels, whose
// permissions rate high); bob pushes b/cassandra.
func startUISite(t *testing.T) *authServer {
	t.Helper()
	kp := cosignKeyPair(t)
	s := startAuthServer(t, authOptions{extra: "trust:\n  policies:\n" + policy("a/*", kp.pub, false) +
		"namespaces:\n  - name: a\n    quota: 1GiB\n"})
	alice, bob := s.users["alice"], s.users["bob"]
	alice.login(t, berthBin, "login")
	signed := alice.pushFixture(t, "kafka", "2.5.1-1.3.2", "a/kafka")
	alice.pushFixture(t, "kafka", "2.5.0-1.3.1", "a/kafka")
	alice.must(t, berthBin, "push", filepath.Join(fixtures, "olm-community", "etcd"), s.addr+"/a")
	alice.must(t, cosignBin, "sign", "--key", kp.key, "--tlog-upload=false", "--yes", s.addr+"/a/kafka@"+signed)
	bob.login(t, berthBin, "login")
	bob.pushFixture(t, "cassandra", "3.11.6-1.0.1", "b/cassandra")

	s.waitIndexed(t, "b/cassandra", "3.11.6_1.0.1")
	s.waitIndexed(t, "a/etcd", etcdCluster)
	admin := s.users["admin"].creds()
	waitUntil(t, s.server, "a/kafka:"+signedKafka+" verified", func() bool {
		h := s.api(t, admin, "GET", "/api/v1/packages/a/kafka/versions/"+signedKafka)
		var v apiv1.Version
		return h.status == http.StatusOK && json.Unmarshal(h.body, &v) == nil && v.Verified
	})
	return s
}

// TestUIBrowser drives the web UI in headless Chromium, with JavaScript on
// and again with it off: alice signs in, searches, filters by a facet, opens
// a package, switches its channel, opens a version with a high permissions
// rating (shown first) and one of its files, downloads it, and a version
// with a verified signature;
// bob's package is neither found nor reachable by its URL. Then axe-core
// checks every page type in light and dark colors and at a phone's width.
func TestUIBrowser(t *testing.T) {
	b := browsertest.Start(t)
	s := startUISite(t)
	for _, tc := range []struct {
		name string
		noJS bool
	}{{"javascript", false}, {"no-javascript", true}} {
		t.Run(tc.name, func(t *testing.T) {
			u := &uiTab{t: t, ctx: b.Tab(t, browsertest.TabOptions{NoJavaScript: tc.noJS}), base: s.url()}
			testUIFlow(u, s, !tc.noJS)
		})
	}
	t.Run("accessibility", func(t *testing.T) { testUIAccessibility(t, b, s) })
}

// testUIFlow is what a cluster admin does in the UI, from signing in to
// signing out; live is whether JavaScript runs.
func testUIFlow(u *uiTab, s *authServer, live bool) {
	t := u.t
	// Anonymous sees nothing of a/: auth is on and a/ is not public.
	u.open("/")
	if u.count(`a[href="`+etcdPage+`"]`) != 0 {
		t.Errorf("anonymous search lists a/etcd")
	}
	u.signIn("alice", passwordOf("alice"))
	// The header names the viewer as people know her, not by her subject.
	if got := u.text(`nav.account strong`); got != "alice" {
		t.Errorf("after signing in the header names %q, want alice", got)
	}
	if body := u.text(`body`); strings.Contains(body, "user:alice") {
		t.Errorf("the page shows the subject user:alice: %q", body)
	}

	// Search: everything alice may see, then words.
	u.open("/")
	for sel, want := range map[string]int{`a[href="` + etcdPage + `"]`: 1, `a[href="` + kafkaPage + `"]`: 1, `a[href="` + cassandra + `"]`: 0} {
		if got := u.count(`#results ` + sel); got != want {
			t.Errorf("search: %d of %s, want %d", got, sel, want)
		}
	}
	u.do("typing etcd", chromedp.SendKeys(chromedp.CSS(`#q`), "etcd"))
	if live {
		// Search as you type replaces the results without a submit.
		u.poll("live results of etcd", `document.querySelector('#results a[href="`+kafkaPage+`"]') === null && document.querySelector('#results a[href="`+etcdPage+`"]') !== null`)
	}
	u.follow(`#search-form button[type=submit]`)
	if got := u.location(); got != "/?q=etcd" && !strings.HasPrefix(got, "/?q=etcd&") {
		t.Errorf("submitting the search form went to %s", got)
	}
	if u.count(`#results a[href="`+etcdPage+`"]`) != 1 || u.count(`#results a[href="`+kafkaPage+`"]`) != 0 {
		t.Errorf("search for etcd: results %q", u.text(`#results .packages`))
	}

	// A facet: format olm leaves a/etcd alone.
	u.open("/")
	u.follow(`section.facets a[href*="format=olm"]`)
	// The first selected value is the format's; the other facets' are "any".
	if got := u.text(`section.facets a[aria-current]`); got != "olm 1" {
		t.Errorf("format facet after following olm: selected %q, want olm 1", got)
	}
	if u.count(`#results a[href="`+etcdPage+`"]`) != 1 || u.count(`#results a[href="`+kafkaPage+`"]`) != 0 {
		t.Errorf("format olm: results %q, want etcd alone", u.text(`#results .packages`))
	}

	// The package, and its other channel.
	u.follow(`#results a[href="` + etcdPage + `"]`)
	if got := u.text(`h1`); got != "etcd" {
		t.Errorf("package page heading %q, want etcd", got)
	}
	if got := u.text(`ul.channels a[aria-current]`); got != "singlenamespace-alpha" {
		t.Errorf("package page: channel shown %q, want the default singlenamespace-alpha", got)
	}
	u.follow(`ul.channels a[href*="channel=clusterwide-alpha"]`)
	if got := u.text(`ul.channels a[aria-current]`); got != "clusterwide-alpha" {
		t.Errorf("after switching: channel shown %q, want clusterwide-alpha", got)
	}
	if u.count(`svg.upgrade-graph g.node.head[data-version="`+etcdCluster+`"]`) != 1 || u.count(`svg.upgrade-graph g.node[data-version="0.9.4"]`) != 0 {
		t.Errorf("the graph of clusterwide-alpha does not have %s as head alone: %q", etcdCluster, u.text(`svg.upgrade-graph`))
	}

	// A version whose permissions rate high, and one of its files.
	u.follow(`a[href="` + etcdPage + `/versions/` + etcdCluster + `"]`)
	if got := u.text(`#perm-h + p .badge`); got != "high" && got != "critical" {
		t.Errorf("%s: permissions rated %q, want high or critical", etcdCluster, got)
	}
	if u.count(`ul.findings .rating-high, ul.findings .rating-critical`) == 0 {
		t.Errorf("%s: no high or critical finding listed: %q", etcdCluster, u.text(`ul.findings`))
	}
	// The reviewer sees the rating first: on the first screen, and the
	// findings before the install commands.
	if !evaluate[bool](u, `document.querySelector('#perm-h + p .badge').getBoundingClientRect().bottom <= window.innerHeight`) {
		t.Errorf("%s: the permissions rating is below the first screen", etcdCluster)
	}
	if !evaluate[bool](u, `!!(document.querySelector('ul.findings').compareDocumentPosition(document.querySelector('#install-h')) & Node.DOCUMENT_POSITION_FOLLOWING)`) {
		t.Errorf("%s: the install commands come before the permissions' findings", etcdCluster)
	}
	u.follow(`ul.files a[href$=".clusterserviceversion.yaml"]`)
	if !strings.HasSuffix(u.text(`h1.path`), ".clusterserviceversion.yaml") {
		t.Errorf("file page heading %q", u.text(`h1.path`))
	}
	// Highlighted: YAML keys are tokens of their own, coloured unlike the text.
	if u.count(`div.code .chroma .nt`) < 10 {
		t.Errorf("the CSV is not highlighted: %d key tokens", u.count(`div.code .chroma .nt`))
	}
	if key, text := u.eval(`getComputedStyle(document.querySelector('div.code .chroma .nt')).color`), u.eval(`getComputedStyle(document.querySelector('div.code .chroma')).color`); key == text {
		t.Errorf("YAML keys have the colour of the text, %s", key)
	}
	// The download link is the UI's, which reads alice's session: the file
	// of her private package comes as an attachment; bob's is not found.
	href := u.eval(`document.querySelector('p.meta a[download]').getAttribute('href')`)
	if !strings.HasPrefix(href, etcdPage+"/versions/"+etcdCluster+"/download/") || !strings.HasSuffix(href, ".clusterserviceversion.yaml") {
		t.Errorf("the file page's download link is %q", href)
	}
	if live {
		if got := u.fetch(href); !strings.HasPrefix(got, "200 attachment; filename=") || !strings.Contains(got, "kind: ClusterServiceVersion") {
			t.Errorf("downloading %s: %.200q", href, got)
		}
		if got := u.fetch(cassandraV + "/download/operator.yaml"); !strings.HasPrefix(got, "404 ") {
			t.Errorf("downloading bob's file: %.200q", got)
		}
	}

	// The namespace, its storage against its quota, the other package and
	// its signed version; bob's namespace shows alice none of its storage.
	u.open("/ui/namespaces/b")
	if n := u.count("#storage-h"); n != 0 {
		t.Errorf("alice sees the storage of bob's namespace: %q", u.text(".storage"))
	}
	u.open("/ui/namespaces/a")
	if got := u.text("#storage-h + p"); !strings.Contains(got, " used of 1.0 GiB ") {
		t.Errorf("namespace a's storage: %q, want what it uses of its 1 GiB quota", got)
	}
	u.follow(`#results a[href="` + kafkaPage + `"]`)
	u.follow(`a[href="` + kafkaPage + `/versions/` + signedKafka + `"]`)
	if got := u.text(`#sigs-h + p .badge`); got != "verified" {
		t.Errorf("%s: signature badge %q, want verified", signedKafka, got)
	}
	if got := u.text(`#sigs-h ~ .table-wrap tbody tr`); !strings.Contains(got, "signature") || !strings.Contains(got, "✓") {
		t.Errorf("%s: signatures %q, want a verified signature", signedKafka, got)
	}

	// Bob's package: not found, not even by its address.
	u.open("/?q=cassandra")
	if u.count(`#results li.package`) != 0 {
		t.Errorf("alice's search for cassandra: %q", u.text(`#results .packages`))
	}
	for _, path := range []string{cassandra, cassandraV} {
		if status := u.open(path); status != http.StatusNotFound {
			t.Errorf("alice opening %s: status %d, want 404", path, status)
		}
	}

	u.follow(`nav.account form button[type=submit]`)
	if u.count(`nav.account a[href="/ui/login"]`) != 1 {
		t.Errorf("after signing out the header has no Sign in link: %q", u.text(`nav.account`))
	}
	if status := u.open(etcdPage); status != http.StatusNotFound {
		t.Errorf("a/etcd after signing out: status %d, want 404", status)
	}
}

// testUIAccessibility runs axe-core on every page type in light and dark
// colors and at a phone's width, and fails on a serious or critical
// violation, or on a page wider than the phone. With BERTH_UI_SCREENSHOTS=1 it saves the pages to docs/ui/.
func testUIAccessibility(t *testing.T, b *browsertest.Browser, s *authServer) {
	// The pages after the sign-in page, seen by alice: each opened by its
	// path with the status it must answer, or followed from the page before.
	pages := []struct {
		name, path string
		status     int64
		follow     string
	}{
		{name: "search", path: "/?q=etcd", status: http.StatusOK},
		{name: "namespace", path: "/ui/namespaces/a", status: http.StatusOK},
		{name: "package", path: etcdPage, status: http.StatusOK},
		{name: "version", path: etcdPage + "/versions/" + etcdCluster, status: http.StatusOK},
		{name: "file", follow: `ul.files a[href$="/etcdbackups.etcd.database.coreos.com.crd.yaml"]`},
		{name: "version-signed", path: kafkaPage + "/versions/" + signedKafka, status: http.StatusOK},
		{name: "404", path: cassandra, status: http.StatusNotFound},
	}
	shots := os.Getenv(screenshotsEnv) == "1"
	for _, view := range []struct {
		name   string
		opts   browsertest.TabOptions
		suffix string          // of the screenshots' names
		saved  map[string]bool // the pages whose screenshots are saved
	}{
		{"light", browsertest.TabOptions{ColorScheme: "light"}, "", map[string]bool{"login": true, "search": true, "package": true, "version": true, "file": true}},
		{"dark", browsertest.TabOptions{ColorScheme: "dark"}, "-dark", map[string]bool{"package": true}},
		{"phone", browsertest.TabOptions{Phone: true}, "-phone", map[string]bool{"search": true}},
	} {
		t.Run(view.name, func(t *testing.T) {
			u := &uiTab{t: t, ctx: b.Tab(t, view.opts), base: s.url()}
			check := func(name string) {
				t.Helper()
				vs, err := browsertest.Axe(u.ctx)
				if err != nil {
					t.Fatalf("%s (%s): %v", name, u.location(), err)
				}
				for _, v := range vs {
					if v.Serious() {
						t.Errorf("%s (%s): %s", name, u.location(), v)
					} else {
						t.Logf("%s (%s): %s", name, u.location(), v)
					}
				}
				// At a phone's width the page itself never scrolls sideways:
				// wide tables, code and graphs scroll in boxes of their own.
				if view.opts.Phone {
					if w := evaluate[int](u, `document.documentElement.scrollWidth - window.innerWidth`); w > 0 {
						t.Errorf("%s (%s): the page is %d px wider than the phone's screen", name, u.location(), w)
					}
				}
				if shots && view.saved[name] {
					if err := browsertest.Screenshot(u.ctx, filepath.Join("..", "..", "docs", "ui", name+view.suffix+".png")); err != nil {
						t.Fatal(err)
					}
				}
			}
			u.open("/ui/login")
			check("login")
			u.signIn("alice", passwordOf("alice"))
			for _, p := range pages {
				if p.follow != "" {
					u.follow(p.follow)
				} else if status := u.open(p.path); status != p.status {
					t.Errorf("%s (%s): status %d, want %d", p.name, p.path, status, p.status)
				}
				check(p.name)
			}
		})
	}
}

// uiTab is a browser tab of the UI tests, on the server at base; its
// methods fail the test when the browser does.
type uiTab struct {
	t    *testing.T
	ctx  context.Context
	base string
}

// stepTimeout bounds one step: a page load, a click, a wait.
const stepTimeout = 30 * time.Second

// open loads path and returns its status.
func (u *uiTab) open(path string) int64 {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.Run(ctx, browsertest.NavigateResponse(u.base+path))
	if err != nil {
		u.t.Fatalf("opening %s: %v", path, err)
	}
	return resp.Status
}

// follow clicks the first element sel matches, a link or a submit button,
// and waits for the page it leads to, which must answer 200.
func (u *uiTab) follow(sel string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	resp, err := chromedp.RunResponse(ctx, chromedp.Click(chromedp.CSS(sel)))
	if err != nil {
		u.t.Fatalf("on %s, following %s: %v", u.location(), sel, err)
	}
	if resp.Status != http.StatusOK {
		u.t.Fatalf("on %s, following %s: status %d", u.location(), sel, resp.Status)
	}
}

// do runs steps, what says which.
func (u *uiTab) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		u.t.Fatalf("on %s, %s: %v", u.location(), what, err)
	}
}

// signIn fills in and sends the sign-in form.
func (u *uiTab) signIn(user, password string) {
	u.t.Helper()
	u.open("/ui/login")
	u.do("filling in the sign-in form",
		chromedp.SendKeys(chromedp.CSS(`#username`), user),
		chromedp.SendKeys(chromedp.CSS(`#password`), password))
	u.follow(`form.login button[type=submit]`)
}

// poll waits until the JavaScript expression is true.
func (u *uiTab) poll(what, expr string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
		u.t.Fatalf("on %s, waiting for %s: %v", u.location(), what, err)
	}
}

// eval evaluates a JavaScript expression of a string.
func (u *uiTab) eval(expr string) string {
	u.t.Helper()
	return evaluate[string](u, expr)
}

// count is the number of elements sel matches.
func (u *uiTab) count(sel string) int {
	u.t.Helper()
	return evaluate[int](u, fmt.Sprintf(`document.querySelectorAll(%s).length`, jsString(sel)))
}

// evaluate evaluates a JavaScript expression in u's page.
func evaluate[T any](u *uiTab, expr string) T {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		u.t.Fatalf("%s: %v", expr, err)
	}
	return v
}

// text is the text of the first element sel matches, spaces collapsed, or
// "" when there is none.
func (u *uiTab) text(sel string) string {
	u.t.Helper()
	return u.eval(fmt.Sprintf(`(document.querySelector(%s)?.textContent ?? '').replace(/\s+/g, ' ').trim()`, jsString(sel)))
}

// fetch requests path from the page, as a link of it would, with its
// cookies, and returns the status, the Content-Disposition and the body,
// separated by spaces.
func (u *uiTab) fetch(path string) string {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, stepTimeout)
	defer cancel()
	expr := fmt.Sprintf(`fetch(%s).then(async r => r.status + ' ' + (r.headers.get('Content-Disposition') ?? '') + ' ' + await r.text())`, jsString(path))
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		u.t.Fatalf("fetching %s: %v", path, err)
	}
	return v
}

// location is the page's path and query.
func (u *uiTab) location() string {
	u.t.Helper()
	return u.eval(`location.pathname + location.search`)
}

// jsString quotes s as a JavaScript string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
