package main

// The images rows of the mirror benchmarks: 20 OLM packages whose CSVs
// name generated images (about -mirror-images-mib MiB) held by two
// upstream `registry` processes standing in for quay.io and ghcr.io,
// copied into a fresh berth with their images by berth mirror export +
// import, by regctl image copy and by oras cp -r (4 at a time each); then
// the delta of one new version with one new image.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

const (
	// The targets: berth at least imagesSpeedup times faster than the
	// faster of regctl and oras; the archive, and the delta, at most
	// archiveOverhead times the bytes they must carry.
	imagesSpeedup = 1.5
	// imagesAt is how many regctl or oras commands run at a time.
	imagesAt   = 4
	imagesSeed = 7
)

// The images rows, in table order.
const (
	rowImgExportImport = "images: berth mirror export + import"
	rowImgExport       = "  of which export"
	rowImgImport       = "  of which import"
	rowImgRegctl       = "images: regctl image copy, 4 at a time"
	rowImgOras         = "images: oras cp -r, 4 at a time"
	rowImgArchive      = "images: archive size / unique blob bytes"
	rowImgDelta        = "images: delta of one new version, bytes / new blobs"
)

func newImageRows() mirrorRows {
	return mirrorRows{
		{name: rowImgExportImport, speedup: imagesSpeedup},
		{name: rowImgExport},
		{name: rowImgImport},
		{name: rowImgRegctl, baseline: true},
		{name: rowImgOras, baseline: true},
		{name: rowImgArchive, target: fmt.Sprintf("<= %.2fx", archiveOverhead), value: "-", detail: "from an export"},
		{name: rowImgDelta, target: fmt.Sprintf("<= %.2fx", archiveOverhead), value: "-", detail: "from the last export + import"},
	}
}

// imagesEnv is what the images contenders share.
type imagesEnv struct {
	set       *imageSet
	pusher    *imagePusher
	addrs     map[string]string // stand-in addresses by the registry host they stand in for
	src       string            // the source berth
	selection string
	// pkgBlobs are the packages' manifests and blobs; unique the bytes
	// and count of every blob and manifest of images and packages, once.
	pkgBlobs    []ocispec.Descriptor
	uniqueBytes int64
	uniqueCount int
	// berthRuns counts berth's runs: the last does the delta.
	berthRuns         int
	archive, exported int64
	// The delta: its archive's size and the bytes of its new blobs, or
	// why it failed.
	deltaArchive, deltaNew int64
	deltaDetail            string
	deltaErr               error
}

// runImages starts the stand-ins, fills them and the source, copies the
// packages with their images with every contender, and prints the images
// table. It returns how many rows are ERROR.
func (e *mirrorEnv) runImages(ctx context.Context) (int, error) {
	im := &imagesEnv{addrs: map[string]string{}, src: e.src.addr, set: planImages(int64(e.o.imagesMiB)<<20, imagesSeed)}
	e.images = im
	for _, host := range []string{operatorRegistry, operandRegistry} {
		dir := filepath.Join(e.root, "stand-in-"+host)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return 0, err
		}
		s, err := startUpstream(ctx, e.registry, dir)
		if err != nil {
			return 0, fmt.Errorf("stand-in for %s: %w", host, err)
		}
		defer s.stop()
		im.addrs[host] = s.addr
		if _, err := e.command(ctx, e.root, e.regctl, "registry", "set", "--tls", "disabled", s.addr); err != nil {
			return 0, err
		}
	}
	if err := e.fillImages(ctx); err != nil {
		return 0, err
	}

	rows := newImageRows()
	check := func(ctx context.Context, dst *catServer) error {
		return checkImages(ctx, dst.addr, im.set.images, im.set.packages)
	}
	contenders := []contender{
		{name: "images-export-import", rows: []string{rowImgExportImport, rowImgExport, rowImgImport}, run: e.imagesExportImport, check: check},
		{name: "images-regctl", rows: []string{rowImgRegctl}, run: e.imagesRegctl, check: check},
		{name: "images-oras", rows: []string{rowImgOras}, run: e.imagesOras, check: check},
	}
	if help, err := e.command(ctx, e.root, e.berth, "mirror", "export", "--help"); err != nil || !strings.Contains(string(help.stdout), "--registry-map") {
		msg := "berth mirror export carries no images (no --registry-map)"
		logf("%s; skipping its rows", msg)
		for _, name := range []string{rowImgExportImport, rowImgExport, rowImgImport, rowImgArchive, rowImgDelta} {
			rows.get(name).result, rows.get(name).detail = "SKIPPED", msg
		}
		contenders = contenders[1:]
	}
	if err := e.runAll(ctx, contenders, rows); err != nil {
		return 0, err
	}
	if im.archive > 0 && rows.get(rowImgExportImport).result != "ERROR" {
		r, ratio := rows.get(rowImgArchive), float64(im.archive)/float64(im.uniqueBytes)
		r.value, r.result = fmt.Sprintf("%.3fx", ratio), verdict(ratio <= archiveOverhead)
		r.detail = fmt.Sprintf("archive of the last run %s; unique blobs and manifests %s; its export reported %s",
			formatBytes(int(im.archive)), formatBytes(int(im.uniqueBytes)), formatBytes(int(im.exported)))
	}
	if r := rows.get(rowImgDelta); r.result != "SKIPPED" {
		switch {
		case im.deltaErr != nil:
			r.result, r.detail = "ERROR", firstLine(im.deltaErr.Error())
		case im.deltaNew > 0:
			ratio := float64(im.deltaArchive) / float64(im.deltaNew)
			r.value, r.result = fmt.Sprintf("%.3fx", ratio), verdict(ratio <= archiveOverhead)
			r.detail = im.deltaDetail
		}
	}
	multi := 0
	for _, i := range im.set.images {
		if len(i.platforms) > 1 {
			multi++
		}
	}
	header := fmt.Sprintf("mirror images: %d OLM packages, %d images (%d multi-arch) on stand-ins for %s and %s; %s in %s unique blobs and manifests "+
		"(generated, seed %d); medians of %d runs; %s",
		len(im.set.packages), len(im.set.images), multi, operatorRegistry, operandRegistry, formatBytes(int(im.uniqueBytes)), thousands(im.uniqueCount),
		imagesSeed, e.o.runs, e.tools())
	return printMirrorTable(os.Stdout, header, rows), nil
}

// fillImages pushes every image to its stand-in and every package to the
// source, waits until the source's catalog has indexed them, and writes
// the selection.
func (e *mirrorEnv) fillImages(ctx context.Context) error {
	im := e.images
	var err error
	if im.pusher, err = newImagePusher(im.addrs); err != nil {
		return err
	}
	logf("images: pushing %d images (%s) to the stand-ins", len(im.set.images), formatBytes(e.o.imagesMiB<<20))
	start := time.Now()
	var imageBlobs [][]ocispec.Descriptor
	for _, i := range im.set.images {
		if err := im.pusher.push(ctx, i); err != nil {
			return err
		}
		imageBlobs = append(imageBlobs, i.blobs)
	}
	logf("images: pushed in %s; pushing %d packages to the source", time.Since(start).Round(time.Millisecond), len(im.set.packages))
	if im.pkgBlobs, err = e.pushPackages(ctx, im.set.packages); err != nil {
		return err
	}
	im.uniqueBytes, im.uniqueCount = uniqueBytes(append(imageBlobs, im.pkgBlobs)...)
	im.selection = filepath.Join(e.root, "images-selection.yaml")
	return os.WriteFile(im.selection, []byte(selectionYAML([]string{imageNamespace})), 0o644)
}

// pushPackages pushes the bundles of ps to the source, waits until its
// catalog has indexed them, and returns their manifests and blobs.
func (e *mirrorEnv) pushPackages(ctx context.Context, ps []*imagePackage) ([]ocispec.Descriptor, error) {
	c, err := pushClient(e.src.addr)
	if err != nil {
		return nil, err
	}
	s := newSearcher(e.src.addr)
	before, err := s.status(ctx)
	if err != nil {
		return nil, err
	}
	var out []ocispec.Descriptor
	for _, p := range ps {
		blobs, err := pushBundle(ctx, c, e.src.addr, p)
		if err != nil {
			return nil, err
		}
		out = append(out, blobs...)
	}
	n := before.Versions + len(ps)
	_, err = pollUntil(ctx, e.src.server, mirrorIndexTimeout, 100*time.Millisecond, func() (bool, error) {
		st, err := s.status(ctx)
		return err == nil && st.Versions >= n, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the source's catalog indexing %d versions: %w", n, err)
	}
	return out, nil
}

// exportArgs are the export flags of the selection, with those that
// read each stand-in's images under the name of the registry it stands
// in for.
func (im *imagesEnv) exportArgs(extra ...string) []string {
	return append([]string{"--source", im.src, "--selection", im.selection,
		"--registry-map", operatorRegistry + "=" + im.addrs[operatorRegistry], "--registry-map", operandRegistry + "=" + im.addrs[operandRegistry]}, extra...)
}

// importArgs put the images under imagePrefix.
func (im *imagesEnv) importArgs() []string { return []string{"--image-prefix", imagePrefix} }

// imagesExportImport exports the packages with their images and imports
// them into dst; the last run then adds a version with a new image and
// carries the delta.
func (e *mirrorEnv) imagesExportImport(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	im := e.images
	var exp, imp procResult
	var err error
	exp, imp, im.archive, im.exported, err = e.carry(ctx, dir, filepath.Join(dir, "images.tar"), dst.addr, im.exportArgs(), im.importArgs())
	if err != nil {
		return nil, err
	}
	if im.berthRuns++; im.berthRuns == e.o.runs {
		im.deltaErr = e.imagesDelta(ctx, dst, dir)
	}
	return []sample{
		{rowImgExportImport, exp.took + imp.took, max(exp.rssKiB, imp.rssKiB)},
		{rowImgExport, exp.took, exp.rssKiB},
		{rowImgImport, imp.took, imp.rssKiB},
	}, nil
}

// imagesDelta pushes a new version of the first package naming a new
// image, exports what dst lacks by its inventory, imports it, and records
// the delta archive's size against the bytes of the new blobs.
func (e *mirrorEnv) imagesDelta(ctx context.Context, dst *catServer, dir string) error {
	im := e.images
	img := im.set.deltaImage()
	if err := im.pusher.push(ctx, img); err != nil {
		return err
	}
	p := *im.set.packages[0]
	p.version = deltaVersion
	p.operands = append([]*image{img}, p.operands[1:]...)
	blobs, err := e.pushPackages(ctx, []*imagePackage{&p})
	if err != nil {
		return err
	}
	old := map[digest.Digest]bool{}
	for _, i := range im.set.images {
		for _, b := range i.blobs {
			old[b.Digest] = true
		}
	}
	for _, b := range im.pkgBlobs {
		old[b.Digest] = true
	}
	var fresh []ocispec.Descriptor
	for _, b := range append(img.blobs, blobs...) {
		if !old[b.Digest] {
			fresh = append(fresh, b)
		}
	}
	im.deltaNew, _ = uniqueBytes(fresh)

	inv := filepath.Join(dir, "inventory.json")
	if _, err := e.command(ctx, dir, e.berth, "mirror", "inventory", dst.addr, "-o", inv); err != nil {
		return err
	}
	exp, imp, size, _, err := e.carry(ctx, dir, filepath.Join(dir, "delta.tar"), dst.addr, im.exportArgs("--inventory", inv), im.importArgs())
	if err != nil {
		return err
	}
	if err := checkImages(ctx, dst.addr, []*image{img}, []*imagePackage{&p}); err != nil {
		return fmt.Errorf("after the delta: %w", err)
	}
	im.deltaArchive = size
	im.deltaDetail = fmt.Sprintf("delta archive %s for %s of new blobs and manifests (%s of %s new image); export %s, import %s",
		formatBytes(int(im.deltaArchive)), formatBytes(int(im.deltaNew)), formatBytes(int(2*im.set.ownSize)), img.name,
		formatDuration(exp.took), formatDuration(imp.took))
	return nil
}

// imageCopies are the source and destination references of every image
// (src from its stand-in) and package version (from the source berth),
// each copied by tag to where berth's import puts it.
func (e *mirrorEnv) imageCopies(dst string) [][2]string {
	im := e.images
	var out [][2]string
	for _, i := range im.set.images {
		out = append(out, [2]string{im.addrs[i.host()] + "/" + i.path() + ":" + i.tag, dst + "/" + imagePrefix + "/" + i.path() + ":" + i.tag})
	}
	for _, p := range im.set.packages {
		ref := "/" + imageNamespace + "/" + p.name + ":" + p.version
		out = append(out, [2]string{e.src.addr + ref, dst + ref})
	}
	return out
}

// imagesRegctl runs regctl image copy for every image and package, 4 at a time.
func (e *mirrorEnv) imagesRegctl(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	if _, err := e.command(ctx, dir, e.regctl, "registry", "set", "--tls", "disabled", dst.addr); err != nil {
		return nil, err
	}
	var commands [][]string
	for _, c := range e.imageCopies(dst.addr) {
		commands = append(commands, []string{"image", "copy", c[0], c[1]})
	}
	return e.parallel(ctx, dir, rowImgRegctl, e.regctl, commands, imagesAt)
}

// imagesOras runs oras cp -r for every image and package, 4 at a time.
func (e *mirrorEnv) imagesOras(ctx context.Context, dst *catServer, dir string) ([]sample, error) {
	var commands [][]string
	for _, c := range e.imageCopies(dst.addr) {
		commands = append(commands, []string{"cp", "-r", "--from-plain-http", "--to-plain-http", "--no-tty", c[0], c[1]})
	}
	return e.parallel(ctx, dir, rowImgOras, e.oras, commands, imagesAt)
}
