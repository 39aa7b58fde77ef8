package main

// The OLM catalog benchmarks (go run ./test/bench -olm, make bench-olm):
// berth serve holding one namespace of OLM packages, timed from a push to
// the namespace's catalog image holding it, against rebuilding the whole
// catalog after every change. See docs/benchmarks.md for what each row
// measures.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

const (
	// olmNamespace holds every package of the OLM corpus.
	olmNamespace = "operators"
	// olmUpdateTarget is how soon after a push the catalog image must hold
	// it (issue 12: "within about a second", debounce included).
	olmUpdateTarget = time.Second
	// olmPoll is how often the catalog tag is resolved after a push;
	// olmUpdateTimeout how long an update may take before the row fails.
	olmPoll          = 2 * time.Millisecond
	olmUpdateTimeout = 30 * time.Second
	// olmQuiet is how long the first complete catalog image must stay the
	// same before the pushes start: the start-up publishes are over.
	olmQuiet = 2 * time.Second
	// olmUpdateOverhead is what an update may push beyond its changed
	// layer: the image config and the manifest (issue 29).
	olmUpdateOverhead = 64 << 10
)

// olmOptions are the flags of the OLM catalog benchmarks.
type olmOptions struct {
	enabled            bool
	packages, versions int
	seed               uint64
	pushes, runs       int
	loadWorkers        int
	opm                string
	keep               bool
}

func registerOLMFlags(o *olmOptions) {
	flag.BoolVar(&o.enabled, "olm", false, "run the OLM catalog image benchmarks instead of the registry comparison")
	flag.IntVar(&o.packages, "olm-packages", 5000, "olm: OLM packages in the namespace")
	flag.IntVar(&o.versions, "olm-versions", 25_000, fmt.Sprintf("olm: versions of those packages in all (1 to %d each)", maxOLMVersions))
	flag.Uint64Var(&o.seed, "olm-seed", 1, "olm: seed of the generated corpus")
	flag.IntVar(&o.pushes, "olm-pushes", 50, "olm: new versions pushed one at a time, each to another package, each timed until the catalog image holds it")
	flag.IntVar(&o.runs, "olm-runs", 3, "olm: runs of the full rebuild and of opm render; the table shows medians")
	flag.IntVar(&o.loadWorkers, "olm-load-workers", 2*runtime.NumCPU(), "olm: packages built and written to the registry storage at a time")
	flag.StringVar(&o.opm, "olm-opm", "", "olm: the opm binary timed rendering the namespace's FBC (default <module>/bin/opm, which make tools builds; \"none\" to skip)")
	flag.BoolVar(&o.keep, "olm-keep", false, "olm: keep the temporary directory (data, server log, FBC) and print its path")
}

func (o *olmOptions) validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{
		{"olm-packages", o.packages}, {"olm-versions", o.versions}, {"olm-pushes", o.pushes},
		{"olm-runs", o.runs}, {"olm-load-workers", o.loadWorkers},
	} {
		if f.value < 1 {
			return fmt.Errorf("-%s must be at least 1", f.name)
		}
	}
	if o.versions < o.packages || o.versions > o.packages*maxOLMVersions {
		return fmt.Errorf("-olm-versions must be between -olm-packages and %d times it", maxOLMVersions)
	}
	if o.pushes > o.packages {
		return errors.New("-olm-pushes must not exceed -olm-packages: each push goes to another package")
	}
	return nil
}

// olmPush is a new version pushed during the update row.
type olmPush struct {
	spec    *pkgSpec
	pkg     *pkgformat.Package
	art     *pkgformat.Artifact
	version olm.Version // as the catalog indexes it, for the full rebuild
}

// runOLM loads the corpus, times the catalog image's updates after pushes
// on berth serve, then the full rebuild and opm render, and prints the table.
func runOLM(ctx context.Context, o olmOptions) error {
	if err := o.validate(); err != nil {
		return err
	}
	began := time.Now()
	modRoot, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	opm, err := findOPM(o.opm, modRoot)
	if err != nil {
		return err
	}
	logf("building berth")
	ws, cleanup, err := newWorkspace(ctx, modRoot, "berth-bench-olm-", o.keep)
	if err != nil {
		return err
	}
	defer cleanup()
	root, serverDir, dataDir, bin, goVersion := ws.root, ws.serverDir, ws.dataDir, ws.bin, ws.goVersion

	c := newOLMCorpus(o.seed, o.packages, o.versions, olmNamespace)
	logf("corpus: %s OLM packages, %s versions in namespace %s (seed %d); building the %d new versions",
		thousands(len(c.packages)), thousands(c.versions), olmNamespace, o.seed, o.pushes)
	pushes, err := buildPushes(c, o.pushes)
	if err != nil {
		return err
	}
	loaded, err := loadCorpus(ctx, dataDir, c, catalogOptions{loadWorkers: o.loadWorkers})
	if err != nil {
		return err
	}
	rows := []catRow{{
		name:   fmt.Sprintf("load %s versions into registry storage (in process, %d workers)", thousands(loaded.versions), o.loadWorkers),
		value:  formatDuration(loaded.took),
		detail: fmt.Sprintf("%s versions/s; %d MiB of blobs", thousands(int(float64(loaded.versions)/loaded.took.Seconds())), loaded.bytes>>20),
	}}
	logf("syncing the loaded data to disk")
	settle()

	logf("starting berth serve on the loaded data, without a catalog")
	srv, times, err := startCatalogServer(ctx, bin, serverDir, dataDir)
	if err != nil {
		return err
	}
	defer func() {
		if srv != nil {
			if err := srv.stop(); err != nil {
				logf("stop %v", err)
			}
		}
	}()
	cat, err := newCatalogReader(srv.addr, olmNamespace)
	if err != nil {
		return err
	}
	initial, initialRow, err := waitInitialCatalog(ctx, srv, cat, times, len(c.packages))
	if err != nil {
		return err
	}
	rows = append(rows, initialRow)
	updates, final, err := measureUpdates(ctx, srv, cat, pushes, initial)
	if err != nil {
		return err
	}
	rows = append(rows, updateRows(updates, initial)...)
	logf("stopping berth serve")
	if err := srv.stop(); err != nil {
		return err
	}
	srv = nil

	anchorRows, err := measureFullRebuild(ctx, o, c, pushes, updates, final, opm, filepath.Join(root, "fbc"))
	if err != nil {
		return err
	}
	rows = append(rows, anchorRows...)

	header := fmt.Sprintf("olm: namespace %s, %s OLM packages, %s versions (seed %d); catalog image %s in %s layers; machine: %d cores, %s/%s, %s",
		olmNamespace, thousands(len(c.packages)), thousands(loaded.versions), o.seed, formatBytes(int(initial.size())),
		thousands(len(initial.manifest.Layers)), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, goVersion)
	printCatalogTable(os.Stdout, header, rows)
	logf("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// findOPM returns the opm binary to time: given, unless it is empty (then
// <modRoot>/bin/opm if it exists) or "none". "" means none.
func findOPM(given, modRoot string) (string, error) {
	switch given {
	case "none":
		return "", nil
	case "":
		p := filepath.Join(modRoot, "bin", "opm")
		if _, err := os.Stat(p); err != nil {
			logf("no %s (make tools builds it): the opm render row is skipped", p)
			return "", nil
		}
		return p, nil
	}
	if _, err := os.Stat(given); err != nil {
		return "", fmt.Errorf("-olm-opm: %w", err)
	}
	return given, nil
}

// buildPushes builds the next version of n packages of c spread over it.
func buildPushes(c *corpus, n int) ([]olmPush, error) {
	targets := pushTargets(c, n)
	out := make([]olmPush, len(targets))
	for i, t := range targets {
		p := &c.packages[t]
		pkg, err := p.nextVersion()
		if err != nil {
			return nil, err
		}
		v, a, err := olmVersion(pkg)
		if err != nil {
			return nil, err
		}
		out[i] = olmPush{spec: p, pkg: pkg, art: a, version: v}
	}
	return out, nil
}

// waitInitialCatalog waits for the server's first reconciliation, then for
// its catalog images to hold packages packages (berth_olm_packages) and
// the catalog tag to stay the same for olmQuiet. The row's time runs from
// the start to the moment that image was first seen; its detail counts
// the catalog manifests published meanwhile.
func waitInitialCatalog(ctx context.Context, srv *catServer, cat *catalogReader, times startTimes, packages int) (*servedImage, catRow, error) {
	st, reconciled, err := waitReconciled(ctx, srv, rebuildTimeout, func(st *apiv1.Status) {
		logf("catalog: %s versions indexed after %s", thousands(st.Versions), formatDuration(time.Since(times.started)))
	})
	if err != nil {
		return nil, catRow{}, err
	}
	logf("catalog reconciled (%s versions) after %s; waiting for the catalog image of %s packages", thousands(st.Versions), formatDuration(reconciled.Sub(times.started)), thousands(packages))
	var img *servedImage
	var since time.Time
	lastProgress := time.Now()
	_, err = pollUntil(ctx, srv.server, rebuildTimeout, rebuildPoll, func() (bool, error) {
		n, found, err := cat.metric(ctx, olmPackagesMetric)
		if err != nil || !found {
			return false, err
		}
		if time.Since(lastProgress) >= 10*time.Second {
			logf("catalog images: %s packages", thousands(int(n)))
			lastProgress = time.Now()
		}
		if n < int64(packages) {
			return false, nil
		}
		got, err := cat.image(ctx)
		if err != nil {
			return false, nil // busy
		}
		if img == nil || got.desc.Digest != img.desc.Digest {
			img, since = got, time.Now()
		}
		return time.Since(since) >= olmQuiet, nil
	})
	if err != nil {
		return nil, catRow{}, fmt.Errorf("waiting for the catalog image of %s: %w", olmNamespace, err)
	}
	publishes, _, err := cat.metric(ctx, olmPublishesMetric)
	if err != nil {
		return nil, catRow{}, err
	}
	row := catRow{
		name:  "start with no catalog.db until the catalog image holds every package",
		value: formatDuration(since.Sub(times.started)),
		detail: fmt.Sprintf("reconciliation done after %s (%s versions indexed, %d failed); %s catalog manifests published until then; image %s: %s layers, %s",
			formatDuration(reconciled.Sub(times.started)), thousands(st.Reconcile.Indexed), st.Reconcile.Failed, thousands(int(publishes)),
			img.desc.Digest.Encoded()[:12], thousands(len(img.manifest.Layers)), formatBytes(int(img.size()))),
	}
	return img, row, nil
}

// olmUpdate is what one push cost the catalog image.
type olmUpdate struct {
	latency time.Duration
	// metricBytes is the growth of berth_olm_bytes_pushed_total, -1 when
	// /metrics has no such counter.
	metricBytes int64
	// layer, config and manifest are the sizes of what the update added:
	// the one changed layer, the image config and the manifest.
	layer, config, manifest int64
}

// expected is what an update pushes when it pushes only the changed
// package's layer, the config and the manifest.
func (u olmUpdate) expected() int64 { return u.layer + u.config + u.manifest }

// withinTarget reports whether the update pushed at most its changed layer
// and olmUpdateOverhead.
func (u olmUpdate) withinTarget() bool { return u.pushed() <= u.layer+olmUpdateOverhead }

// pushed is the bytes the update pushed: the metric's growth, or when there
// is no metric what the manifest diff says.
func (u olmUpdate) pushed() int64 {
	if u.metricBytes >= 0 {
		return u.metricBytes
	}
	return u.expected()
}

// measureUpdates pushes each new version with berth's client, one at a time,
// and times it from Push returning to the catalog tag (resolved every
// olmPoll) naming another image. Then, untimed, it checks that the new image
// differs from the one before in the pushed package's layer alone, and that
// this layer's FBC has the new bundle, replacing the package's head, and
// reads how many bytes the publisher pushed from /metrics. It returns the
// updates and the last image.
func measureUpdates(ctx context.Context, srv *catServer, cat *catalogReader, pushes []olmPush, img *servedImage) ([]olmUpdate, *servedImage, error) {
	cl, err := pushClient(srv.addr)
	if err != nil {
		return nil, nil, err
	}
	logf("pushing %d new versions one at a time, each timed until the catalog image holds it", len(pushes))
	settle()
	out := make([]olmUpdate, len(pushes))
	for i, p := range pushes {
		before, err := cat.pushedBytes(ctx)
		if err != nil {
			return nil, nil, err
		}
		ref := client.Reference{Registry: srv.addr, Namespace: p.spec.namespace, Name: p.spec.name, Tag: p.version.Version}
		if _, err := cl.Push(ctx, ref, p.art); err != nil {
			return nil, nil, err
		}
		pushed := time.Now()
		seen, err := pollUntil(ctx, srv.server, olmUpdateTimeout, olmPoll, func() (bool, error) {
			d, err := cat.resolve(ctx)
			return err == nil && d != img.desc.Digest, err
		})
		if err != nil {
			return nil, nil, fmt.Errorf("catalog image after pushing %s/%s:%s: %w", p.spec.namespace, p.spec.name, p.version.Version, err)
		}
		u := olmUpdate{latency: seen.Sub(pushed), metricBytes: -1}
		next, err := cat.image(ctx)
		if err != nil {
			return nil, nil, err
		}
		layer, err := checkUpdate(ctx, cat, img, next, p)
		if err != nil {
			return nil, nil, fmt.Errorf("catalog image after pushing %s/%s:%s: %w", p.spec.namespace, p.spec.name, p.version.Version, err)
		}
		u.layer, u.config, u.manifest = layer.Size, next.manifest.Config.Size, next.desc.Size
		if before.found {
			after, err := cat.waitPushedBytes(ctx, srv, before)
			if err != nil {
				return nil, nil, err
			}
			u.metricBytes = after.bytes - before.bytes
		}
		out[i], img = u, next
		logf("update %d/%d (%s): %s, %s pushed", i+1, len(pushes), p.spec.name, formatDuration(u.latency), formatBytes(int(u.pushed())))
	}
	return out, img, nil
}

// updateRows are the rows of the updates: their latency, and the bytes
// each pushed against the whole image.
func updateRows(updates []olmUpdate, initial *servedImage) []catRow {
	lat := updatesLatency(updates)
	p99 := percentile(lat, 0.99)
	rows := []catRow{{
		name:   fmt.Sprintf("catalog image update after a push: %d pushes, one at a time", len(updates)),
		value:  formatDuration(percentile(lat, 0.50)),
		p99:    formatDuration(p99),
		target: "p99 <= " + formatDuration(olmUpdateTarget),
		result: verdict(p99 <= olmUpdateTarget),
		detail: fmt.Sprintf("from Push returning to the catalog tag naming a new image (resolved every %s); debounce included; max %s",
			formatDuration(olmPoll), formatDuration(slices.Max(lat))),
	}}
	var layers, overhead, metric []int64
	exact, within := 0, true
	for _, u := range updates {
		layers = append(layers, u.layer)
		overhead = append(overhead, u.config+u.manifest)
		metric = append(metric, u.metricBytes)
		within = within && u.withinTarget()
		if u.metricBytes == u.expected() {
			exact++
		}
	}
	sizes := fmt.Sprintf("changed layer p50 %s, manifest + config p50 %s (max %s)", formatBytes(int(bytesPercentile(layers, 0.50))),
		formatBytes(int(bytesPercentile(overhead, 0.50))), formatBytes(int(slices.Max(overhead))))
	whole := initial.size()
	med := medianUpdateBytes(updates)
	share := fmt.Sprintf("p50 is %.3f%% of the whole image (%s)", 100*float64(med)/float64(whole), formatBytes(int(whole)))
	row := catRow{name: "bytes pushed per update", value: formatBytes(int(med)), target: "<= changed layer + " + formatBytes(olmUpdateOverhead)}
	if updates[0].metricBytes < 0 {
		row.result = "ERROR"
		row.detail = fmt.Sprintf("no %s on /metrics; value from the manifest diff: %s; %s", olmBytesMetric, sizes, share)
		return append(rows, row)
	}
	row.p99 = formatBytes(int(bytesPercentile(metric, 0.99)))
	row.result = verdict(within)
	row.detail = fmt.Sprintf("%s growth; %s; %d of %d updates pushed exactly the changed layer, the config and the manifest; %s",
		olmBytesMetric, sizes, exact, len(updates), share)
	return append(rows, row)
}

func updatesLatency(updates []olmUpdate) []time.Duration {
	out := make([]time.Duration, len(updates))
	for i, u := range updates {
		out[i] = u.latency
	}
	return out
}

// medianUpdateBytes is the median of the bytes the updates pushed.
func medianUpdateBytes(updates []olmUpdate) int64 {
	bs := make([]int64, len(updates))
	for i, u := range updates {
		bs[i] = u.pushed()
	}
	return bytesPercentile(bs, 0.50)
}

// bytesPercentile is percentile's nearest-rank p-quantile of byte counts.
func bytesPercentile(bs []int64, p float64) int64 {
	ds := make([]time.Duration, len(bs))
	for i, b := range bs {
		ds[i] = time.Duration(b)
	}
	return int64(percentile(ds, p))
}

// measureFullRebuild is the anchor: every version of the namespace as the
// server holds it after the pushes, rendered and built into a whole catalog
// image in process, runs times, which must come out as served, the image
// berth serve published after the updates; then the FBC written as a
// directory into fbcDir and rendered by opm, runs times, unless opm is "".
// The ratios are against the updates' p50 latency and median bytes.
func measureFullRebuild(ctx context.Context, o olmOptions, c *corpus, pushes []olmPush, updates []olmUpdate, served *servedImage, opm, fbcDir string) ([]catRow, error) {
	updateP50, updateBytes := percentile(updatesLatency(updates), 0.50), medianUpdateBytes(updates)
	logf("building the bundles of %s versions in process for the full rebuild", thousands(c.versions+len(pushes)))
	extra := make(map[string]olm.Version, len(pushes))
	for _, p := range pushes {
		extra[p.spec.name] = p.version
	}
	src, err := buildOLMSource(ctx, c, extra, o.loadWorkers)
	if err != nil {
		return nil, err
	}
	host := served.bundleHost
	var took []time.Duration
	var last rebuildResult
	for run := range o.runs {
		settle()
		r, err := fullRebuild(ctx, src, host)
		if err != nil {
			return nil, err
		}
		took = append(took, r.took)
		last = r
		logf("full rebuild, run %d/%d: %s, %s pushed", run+1, o.runs, formatDuration(r.took), formatBytes(int(r.bytes)))
	}
	same := "the image berth serve published after the pushes"
	if last.digest != served.desc.Digest {
		same = fmt.Sprintf("image %s, but berth serve published %s after the pushes", last.digest, served.desc.Digest)
	}
	rows := []catRow{{
		name:   fmt.Sprintf("full rebuild: render %s packages and build the whole image (in process, no network)", thousands(len(src.versions))),
		value:  formatDuration(percentile(took, 0.50)),
		target: "= the served image",
		result: verdict(last.digest == served.desc.Digest),
		detail: fmt.Sprintf("median of %d (%s to %s); %s the update p50; pushes the whole image, %s in %s blobs and a manifest, %s the update's median bytes; %s",
			o.runs, formatDuration(slices.Min(took)), formatDuration(slices.Max(took)), multiple(percentile(took, 0.50), updateP50),
			formatBytes(int(last.bytes)), thousands(last.blobs), multipleBytes(last.bytes, updateBytes), same),
	}}

	if opm == "" {
		return append(rows, catRow{name: "opm render <FBC dir> -o json", result: "SKIPPED", detail: "no opm binary (-olm-opm)"}), nil
	}
	size, err := writeFBCDir(fbcDir, host, src)
	if err != nil {
		return nil, err
	}
	var opmTook []time.Duration
	var out int64
	for run := range o.runs {
		settle()
		d, n, err := opmRender(ctx, opm, fbcDir)
		if err != nil {
			return nil, err
		}
		opmTook, out = append(opmTook, d), n
		logf("opm render, run %d/%d: %s", run+1, o.runs, formatDuration(d))
	}
	rows = append(rows, catRow{
		name:  "opm render <FBC dir> -o json (opm's render of the namespace's FBC directory)",
		value: formatDuration(percentile(opmTook, 0.50)),
		detail: fmt.Sprintf("median of %d (%s to %s); %s the update p50; opm %s; %s packages, %s of FBC in, %s of JSON out; renders only, builds and pushes no image",
			o.runs, formatDuration(slices.Min(opmTook)), formatDuration(slices.Max(opmTook)), multiple(percentile(opmTook, 0.50), updateP50),
			opmVersion(opm), thousands(len(src.versions)), formatBytes(int(size)), formatBytes(int(out))),
	})
	return rows, nil
}

// multiple prints a/b as "123x", or "-" when b is 0.
func multiple(a, b time.Duration) string { return multipleBytes(int64(a), int64(b)) }

func multipleBytes(a, b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%sx", thousands(int(float64(a)/float64(b)+0.5)))
}
