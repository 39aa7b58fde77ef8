package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-registry/berth/internal/browsertest"
	"github.com/berth-registry/berth/quota"
	"github.com/berth-registry/berth/ui"
)

func TestMain(m *testing.M) { os.Exit(browsertest.Run(m)) }

// TestNamespaceStorageAccessible runs axe-core on a namespace's page with
// its storage near its quota, at its quota and without a quota, in light
// and dark colors and at a phone's width, and fails on a serious or
// critical violation or on a page wider than the phone. The browser tests
// of test/e2e check the rest of the UI so.
func TestNamespaceStorageAccessible(t *testing.T) {
	b := browsertest.Start(t)
	l := ledger{usages: map[string]quota.Usage{
		"near": {Namespace: "near", UsedBytes: 990 << 20, LimitBytes: 1000 << 20, Blobs: 41, OpenUploads: 2},
		"full": {Namespace: "full", UsedBytes: 10 << 30, LimitBytes: 10 << 30, Blobs: 7},
		"free": {Namespace: "free", UsedBytes: 3 << 40, Blobs: 12345},
	}}
	srv := httptest.NewServer(newUI(newEnv(t), ui.Options{Quota: l}))
	t.Cleanup(srv.Close)
	for _, view := range []struct {
		name string
		opts browsertest.TabOptions
	}{
		{"light", browsertest.TabOptions{ColorScheme: "light"}},
		{"dark", browsertest.TabOptions{ColorScheme: "dark"}},
		{"phone", browsertest.TabOptions{Phone: true}},
	} {
		t.Run(view.name, func(t *testing.T) {
			tab := b.Tab(t, view.opts)
			for _, ns := range []string{"near", "full", "free"} {
				ctx, cancel := context.WithTimeout(tab, 30*time.Second)
				resp, err := chromedp.Run(ctx, browsertest.NavigateResponse(srv.URL+"/ui/namespaces/"+ns))
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", ns, err)
				}
				if resp.Status != http.StatusOK {
					t.Errorf("%s: status %d", ns, resp.Status)
				}
				shown, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#storage-h').length`))
				if err != nil || shown != 1 {
					t.Errorf("%s: the page has %d storage sections (%v)", ns, shown, err)
				}
				checkAccessible(ctx, t, ns, view.opts.Phone)
				cancel()
			}
		})
	}
}

// checkAccessible runs axe-core on the page open in ctx, named name, and
// fails on a serious or critical violation, or, on a phone, on a page wider
// than its screen.
func checkAccessible(ctx context.Context, t *testing.T, name string, phone bool) {
	t.Helper()
	vs, err := browsertest.Axe(ctx)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	for _, v := range vs {
		if v.Serious() {
			t.Errorf("%s: %s", name, v)
		} else {
			t.Logf("%s: %s", name, v)
		}
	}
	if phone {
		w, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.documentElement.scrollWidth - window.innerWidth`))
		if err != nil || w > 0 {
			t.Errorf("%s: the page is %d px wider than the phone's screen (%v)", name, w, err)
		}
	}
}
