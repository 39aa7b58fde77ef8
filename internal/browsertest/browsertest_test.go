package browsertest

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func TestMain(m *testing.M) { os.Exit(Run(m)) }

// strictCSP allows scripts, styles and images from the page's origin only:
// no inline script or style, no eval.
const strictCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'"

// pages are the test site's documents.
var pages = map[string]string{
	"/clean": `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Clean</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="stylesheet" href="/style.css"></head>
<body><header><p>berth</p></header><main><h1>Search</h1>
<form action="/clean"><label for="q">Query</label> <input id="q" name="q"> <button>Search</button></form>
</main></body></html>`,
	"/violations": `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Violations</title></head>
<body><main><h1>Violations</h1><input name="q"><img src="/missing.png"></main></body></html>`,
	"/script": `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Script</title></head>
<body><main><h1>Script</h1><p id="external">not run</p><p id="inline">not run</p>
<script src="/script.js"></script>
<script>document.getElementById('inline').textContent = 'ran';</script></main></body></html>`,
	"/cookie": `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Cookie</title></head>
<body><main><h1>Cookie</h1></main></body></html>`,
	"/script.js": `document.getElementById('external').textContent = 'ran';`,
	"/style.css": `body { background: #fff; color: #000 }
@media (prefers-color-scheme: dark) { body { background: #000; color: #fff } }`,
}

// site serves pages on 127.0.0.1 under strictCSP.
func site(t *testing.T) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Security-Policy", strictCSP)
		if r.URL.Path == "/cookie" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "tab", Path: "/"})
		}
		switch filepath.Ext(r.URL.Path) {
		case ".js":
			w.Header().Set("Content-Type", "text/javascript")
		case ".css":
			w.Header().Set("Content-Type", "text/css")
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestAxe(t *testing.T) {
	b := Start(t)
	ts := site(t)
	for _, noJS := range []bool{false, true} {
		ctx := b.Tab(t, TabOptions{NoJavaScript: noJS})
		if err := chromedp.Do(ctx, Navigate(ts.URL+"/violations")); err != nil {
			t.Fatal(err)
		}
		vs, err := Axe(ctx)
		if err != nil {
			t.Fatalf("NoJavaScript=%v: %v", noJS, err)
		}
		for _, want := range []string{"label", "image-alt"} {
			i := slices.IndexFunc(vs, func(v Violation) bool { return v.ID == want })
			if i < 0 {
				t.Errorf("NoJavaScript=%v: /violations: no %s violation in %v", noJS, want, vs)
				continue
			}
			if !vs[i].Serious() || len(vs[i].Targets) != 1 {
				t.Errorf("NoJavaScript=%v: /violations: %v, want a serious or critical violation of one element", noJS, vs[i])
			}
		}

		if err := chromedp.Do(ctx, Navigate(ts.URL+"/clean")); err != nil {
			t.Fatal(err)
		}
		if vs, err := Axe(ctx); err != nil || len(vs) != 0 {
			t.Errorf("NoJavaScript=%v: /clean: violations %v, %v; want none", noJS, vs, err)
		}
	}
}

func TestJavaScript(t *testing.T) {
	b := Start(t)
	ts := site(t)
	for _, tc := range []struct {
		noJS     bool
		external string
	}{{false, "ran"}, {true, "not run"}} {
		ctx := b.Tab(t, TabOptions{NoJavaScript: tc.noJS})
		// The second load follows a run of Axe, which must leave the tab's
		// JavaScript as it found it.
		for _, load := range []string{"first load", "load after Axe"} {
			if err := chromedp.Do(ctx, Navigate(ts.URL+"/script")); err != nil {
				t.Fatal(err)
			}
			external, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("external")))
			if err != nil {
				t.Fatal(err)
			}
			inline, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("inline")))
			if err != nil {
				t.Fatal(err)
			}
			// The inline script never runs: the page's CSP forbids it, as
			// berth's does, which is what Axe must work under.
			if external != tc.external || inline != "not run" {
				t.Errorf("NoJavaScript=%v, %s: external script %q, inline script %q; want %q, %q", tc.noJS, load, external, inline, tc.external, "not run")
			}
			if _, err := Axe(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestViewportAndColorScheme(t *testing.T) {
	b := Start(t)
	ts := site(t)
	for _, tc := range []struct {
		opts       TabOptions
		width      int
		background string
	}{
		{TabOptions{}, 1280, "rgb(255, 255, 255)"},
		{TabOptions{ColorScheme: "dark"}, 1280, "rgb(0, 0, 0)"},
		{TabOptions{Phone: true, NoJavaScript: true}, PhoneWidth, "rgb(255, 255, 255)"},
	} {
		ctx := b.Tab(t, tc.opts)
		if err := chromedp.Do(ctx, Navigate(ts.URL+"/clean")); err != nil {
			t.Fatal(err)
		}
		width, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.clientWidth`))
		if err != nil {
			t.Fatal(err)
		}
		bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`))
		if err != nil {
			t.Fatal(err)
		}
		if width != tc.width || bg != tc.background {
			t.Errorf("%+v: width %d, background %s; want %d, %s", tc.opts, width, bg, tc.width, tc.background)
		}
	}

	ctx := b.Tab(t, TabOptions{})
	if err := chromedp.Do(ctx, Navigate(ts.URL+"/clean"), ColorScheme("dark")); err != nil {
		t.Fatal(err)
	}
	if bg, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.body).backgroundColor`)); err != nil || bg != "rgb(0, 0, 0)" {
		t.Errorf("after ColorScheme(dark): background %s, %v; want rgb(0, 0, 0)", bg, err)
	}
}

func TestTabsShareNoCookies(t *testing.T) {
	b := Start(t)
	ts := site(t)
	first, second := b.Tab(t, TabOptions{}), b.Tab(t, TabOptions{})
	if err := chromedp.Do(first, Navigate(ts.URL+"/cookie")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(second, Navigate(ts.URL+"/clean")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want string
	}{{"first", first, "session=tab"}, {"second", second, ""}} {
		if got, err := chromedp.Run(tc.ctx, chromedp.Evaluate[string](`document.cookie`)); err != nil || got != tc.want {
			t.Errorf("%s tab: cookies %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
}

func TestScreenshot(t *testing.T) {
	b := Start(t)
	ts := site(t)
	ctx := b.Tab(t, TabOptions{})
	path := filepath.Join(t.TempDir(), "shots", "clean.png")
	if err := chromedp.Do(ctx, Navigate(ts.URL+"/clean")); err != nil {
		t.Fatal(err)
	}
	if err := Screenshot(ctx, path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("%s is no PNG: %v", path, err)
	}
	if w := img.Bounds().Dx(); w != 1280 {
		t.Errorf("screenshot is %d pixels wide, want 1280", w)
	}
}

func TestLoopbackOnly(t *testing.T) {
	b := Start(t)
	ctx := b.Tab(t, TabOptions{})
	for _, u := range []string{"http://example.com/", "http://localhost/", "https://127.0.0.1/", "file:///etc/passwd", "http://192.0.2.1/"} {
		if err := chromedp.Do(ctx, Navigate(u)); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("Navigate(%s): %v, want ErrNotLoopback", u, err)
		}
		if _, err := chromedp.Run(ctx, NavigateResponse(u)); !errors.Is(err, ErrNotLoopback) {
			t.Errorf("NavigateResponse(%s): %v, want ErrNotLoopback", u, err)
		}
	}
	// Past Navigate, the browser itself reaches no address but loopback.
	err := chromedp.Do(ctx, chromedp.Navigate("http://192.0.2.1/"))
	if err == nil || !strings.Contains(err.Error(), "PROXY") {
		t.Errorf("chromedp.Navigate(http://192.0.2.1/): %v, want the proxy's refusal", err)
	}
}

func TestNavigateResponse(t *testing.T) {
	b := Start(t)
	ts := site(t)
	ctx := b.Tab(t, TabOptions{})
	resp, err := chromedp.Run(ctx, NavigateResponse(ts.URL+"/nowhere"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != http.StatusNotFound {
		t.Errorf("status %d, want 404", resp.Status)
	}
}

func TestMissingTools(t *testing.T) {
	t.Setenv(ChromiumEnv, filepath.Join(t.TempDir(), "chromium"))
	_, err := launch()
	var missing *missingError
	if !errors.As(err, &missing) || !strings.Contains(err.Error(), "make chromium") {
		t.Errorf("launch without Chromium: %v, want it missing and `make chromium` named", err)
	}
}
