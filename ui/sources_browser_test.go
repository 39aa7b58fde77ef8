package ui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/berth-registry/berth/internal/browsertest"
	"github.com/berth-registry/berth/ui"
)

// TestSourcesAccessible runs axe-core on the sources page, with sources
// that published and failed, and on one without sources, in light and dark
// colors and at a phone's width, and fails on a serious or critical
// violation or on a page wider than the phone.
func TestSourcesAccessible(t *testing.T) {
	b := browsertest.Start(t)
	srv := httptest.NewServer(newUI(newEnv(t), ui.Options{Sources: testTracker()}))
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
			for _, path := range []string{"/ui/sources", "/ui/sources?namespace=nobody"} {
				ctx, cancel := context.WithTimeout(tab, 30*time.Second)
				resp, err := chromedp.Run(ctx, browsertest.NavigateResponse(srv.URL+path))
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", path, err)
				}
				if resp.Status != http.StatusOK {
					t.Errorf("%s: status %d", path, resp.Status)
				}
				checkAccessible(ctx, t, path, view.opts.Phone)
				cancel()
			}
		})
	}
}
