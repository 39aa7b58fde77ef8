// Package browsertest gives tests a real web browser: headless Chromium,
// driven through the Chrome DevTools Protocol by chromedp, with a tab per
// test, accessibility checks by axe-core run inside the page, and full-page
// screenshots. A package's tests share one browser, started by the first
// test that asks for it and stopped when the package's tests end:
//
//	func TestMain(m *testing.M) { os.Exit(browsertest.Run(m)) }
//
// The browser reaches nothing but loopback: Navigate refuses any address but
// 127.0.0.1, and Chromium sends every other request to a proxy on a port
// nothing listens on.
//
// Without Chromium (/usr/bin/chromium, or the path in BERTH_CHROMIUM; `make
// chromium` installs it) or axe-core (tools/axe/node_modules, `make axe`), a
// test that asks for the browser is skipped, and fails when CI=true.
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/berth-registry/berth/internal/testenv"
)

// ChromiumEnv names the environment variable that overrides the path of
// the Chromium binary, DefaultChromium.
const ChromiumEnv = "BERTH_CHROMIUM"

// DefaultChromium is where Debian's chromium package installs the browser.
const DefaultChromium = "/usr/bin/chromium"

// axePath is axe-core's browser bundle under the module root, as `make axe`
// installs it from tools/axe/package-lock.json.
const axePath = "tools/axe/node_modules/axe-core/axe.min.js"

// DefaultTimeout bounds what a test does in one tab, unless
// TabOptions.Timeout says otherwise.
const DefaultTimeout = 2 * time.Minute

// startTimeout bounds Chromium's start.
const startTimeout = time.Minute

// Phone's viewport, in CSS pixels: a small Android phone held upright.
const (
	PhoneWidth  = 360
	PhoneHeight = 740
)

// missingError says a tool the browser tests need is not installed, and
// which make target installs it.
type missingError struct {
	tool, path, target string
}

func (e *missingError) Error() string {
	return fmt.Sprintf("%s not found at %s; `make %s` installs it", e.tool, e.path, e.target)
}

var (
	once     sync.Once
	shared   *Browser
	startErr error
)

// Browser is a running headless Chromium, shared by a test package's tests.
type Browser struct {
	ctx    context.Context // the browser's chromedp context, parent of every tab
	cancel context.CancelFunc
	axe    string // axe-core's source, injected into pages by Axe
}

// Run runs the package's tests and stops the browser they started, if any;
// it returns m.Run's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}

// Stop stops the package's browser, if one was started, and removes its
// profile directory. A package whose TestMain does more than Run calls it
// after m.Run.
func Stop() {
	if shared != nil {
		shared.cancel()
	}
}

// Start returns the package's browser, starting it on first use. It skips
// the test when Chromium or axe-core is not installed, and fails it when
// CI=true or when Chromium does not start.
func Start(t testing.TB) *Browser {
	t.Helper()
	once.Do(func() { shared, startErr = launch() })
	var missing *missingError
	switch {
	case errors.As(startErr, &missing) && !testenv.CI():
		t.Skip("browsertest:", startErr)
	case startErr != nil:
		t.Fatal("browsertest:", startErr)
	}
	return shared
}

// launch starts headless Chromium with a fresh profile in a temporary
// directory, which chromedp makes and removes, and reads axe-core's source.
func launch() (*Browser, error) {
	exe := os.Getenv(ChromiumEnv)
	if exe == "" {
		exe = DefaultChromium
	}
	if _, err := exec.LookPath(exe); err != nil {
		return nil, &missingError{tool: "Chromium", path: exe, target: "chromium"}
	}
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	axe, err := os.ReadFile(filepath.Join(root, axePath))
	if errors.Is(err, os.ErrNotExist) {
		return nil, &missingError{tool: "axe-core", path: filepath.Join(root, axePath), target: "axe"}
	} else if err != nil {
		return nil, err
	}
	var output strings.Builder
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		// Requests to loopback bypass a proxy; every other one goes to the
		// discard port, where nothing answers.
		chromedp.ProxyServer("127.0.0.1:9"),
		chromedp.WindowSize(1280, 800),
		chromedp.CombinedOutput(&lockedWriter{b: &output}),
	)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	b := &Browser{ctx: ctx, axe: string(axe), cancel: func() { cancelCtx(); cancelAlloc() }}
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err = <-started:
	case <-time.After(startTimeout):
		err = fmt.Errorf("no answer in %s", startTimeout)
	}
	if err != nil {
		b.cancel()
		return nil, fmt.Errorf("starting %s: %w\n%s", exe, err, output.String())
	}
	return b, nil
}

// lockedWriter collects Chromium's output, written from chromedp's goroutine.
type lockedWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// moduleRoot is the nearest directory above the working directory (the
// test's package) that holds go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// TabOptions says how a tab is set up. The zero value is a desktop window
// of 1280×800 with JavaScript on, in the browser's default (light) color
// scheme, for DefaultTimeout.
type TabOptions struct {
	// NoJavaScript turns script execution off in the tab, for every page
	// it loads. Axe and the actions of chromedp still work.
	NoJavaScript bool
	// Phone gives the tab a phone's viewport, PhoneWidth×PhoneHeight, as a
	// mobile device with touch.
	Phone bool
	// ColorScheme is the prefers-color-scheme the tab's pages see,
	// "light" or "dark"; empty leaves the browser's default, light.
	ColorScheme string
	// Timeout bounds everything done with the tab's context; <= 0 means
	// DefaultTimeout.
	Timeout time.Duration
}

// Tab opens a new tab in the browser, set up as o says, and returns its
// chromedp context, for chromedp.Do and chromedp.Run. Each tab is a browser
// context of its own, as a private window is: tabs share no cookies, so a
// login in one is not in another. The tab closes when the test ends; a test
// fails when the tab cannot be set up.
func (b *Browser) Tab(t testing.TB, o TabOptions) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	var setup []chromedp.Action[chromedp.Void]
	if o.NoJavaScript {
		setup = append(setup, scripts(false))
	}
	if o.Phone {
		setup = append(setup, chromedp.EmulateViewport(PhoneWidth, PhoneHeight, chromedp.EmulateMobile, chromedp.EmulateTouch))
	}
	if o.ColorScheme != "" {
		setup = append(setup, ColorScheme(o.ColorScheme))
	}
	// The tab's first action opens it, and must not carry a deadline: the
	// tab would close when it passed.
	if err := chromedp.Do(ctx, setup...); err != nil {
		t.Fatalf("browsertest: opening a tab: %v", err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(cancelTimeout)
	return context.WithValue(ctx, tabKey{}, o)
}

// tabKey is the key of a tab context's TabOptions.
type tabKey struct{}

// scriptsOff reports whether the tab of ctx has JavaScript off.
func scriptsOff(ctx context.Context) bool {
	o, _ := ctx.Value(tabKey{}).(TabOptions)
	return o.NoJavaScript
}

// ColorScheme makes the tab's pages see prefers-color-scheme as scheme,
// "light" or "dark", from now on; the page in the tab restyles at once.
func ColorScheme(scheme string) chromedp.Action[chromedp.Void] {
	return call(emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	})
}

// scripts turns script execution in the tab on or off.
func scripts(on bool) chromedp.Action[chromedp.Void] {
	return call(emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
}

// call makes an action of a DevTools command whose result is empty.
func call[P, R any](cmd cdp.Command[P, R], params P) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cmd, params)
		return err
	})
}

// ErrNotLoopback is returned by Navigate and NavigateResponse for an
// address that is not http on 127.0.0.1.
var ErrNotLoopback = errors.New("browsertest: only http://127.0.0.1 addresses may be opened")

// Navigate opens rawURL in the tab and waits for the page to load. It
// returns ErrNotLoopback, opening nothing, unless rawURL is http on
// 127.0.0.1.
func Navigate(rawURL string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if err := loopback(rawURL); err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.Navigate(rawURL)(ctx, t)
	}
}

// NavigateResponse is Navigate, returning the response that brought the
// page, with its status.
func NavigateResponse(rawURL string) chromedp.Action[*network.Response] {
	return func(ctx context.Context, t *chromedp.Target) (*network.Response, error) {
		if err := loopback(rawURL); err != nil {
			return nil, err
		}
		return chromedp.NavigateResponse(rawURL)(ctx, t)
	}
}

func loopback(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" {
		return fmt.Errorf("%w: %q", ErrNotLoopback, rawURL)
	}
	return nil
}

// Screenshot saves a PNG of the whole page in the tab, beyond the viewport,
// to path, making its directory.
func Screenshot(ctx context.Context, path string) error {
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		return fmt.Errorf("screenshot %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, png, 0o644)
}
