package main

// Tests of the images rows' pure parts: the plan of the generated images,
// the CSVs that name them and the table. Nothing here starts a server or
// runs a tool.

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
)

func TestPlanImages(t *testing.T) {
	const total = 64 << 20
	s := planImages(total, 7)
	if len(s.packages) != imagePackages {
		t.Fatalf("%d packages, want %d", len(s.packages), imagePackages)
	}
	layers := map[*layer]int{} // how many images use each layer
	multi := 0
	var sum int64
	for _, im := range s.images {
		if len(im.platforms) > 1 {
			multi++
		}
		seen := map[*layer]bool{}
		for _, p := range im.platforms {
			for _, l := range p.layers {
				if !seen[l] {
					seen[l] = true
					layers[l]++
				}
			}
		}
	}
	shared := 0
	for l, n := range layers {
		sum += l.size
		if n > 1 {
			shared++
		}
	}
	if multi != imagePackages/5 {
		t.Errorf("%d multi-arch images, want %d", multi, imagePackages/5)
	}
	if shared != 3 {
		t.Errorf("%d layers shared between images, want the 3 base layers", shared)
	}
	if sum < total*99/100 || sum > total*101/100 {
		t.Errorf("the layers add up to %d bytes, want about %d", sum, total)
	}
	names := map[string]bool{}
	for _, im := range s.images {
		// berth's default prefix drops the host: the paths must differ.
		if names[im.path()] {
			t.Errorf("two images at path %s", im.path())
		}
		names[im.path()] = true
	}
	again := planImages(total, 7)
	for i, im := range s.images {
		if im.name != again.images[i].name || im.platforms[0].layers[1].seed != again.images[i].platforms[0].layers[1].seed {
			t.Fatalf("planImages is not deterministic at image %d", i)
		}
	}
	if d := s.deltaImage(); names[d.path()] && d.tag == "v"+imageVersion {
		t.Errorf("the delta image %s:%s is one of the set", d.name, d.tag)
	}
}

func TestImageBundle(t *testing.T) {
	s := planImages(1<<20, 7)
	for i, im := range s.images {
		im.digest = digest.FromString(fmt.Sprint(i))
	}
	for _, p := range s.packages[:2] {
		pkg, err := p.bundle()
		if err != nil {
			t.Fatal(err)
		}
		container := p.operator.byDigest()
		if p.byTag {
			container = p.operator.name + ":" + p.operator.tag
		}
		// berth reads relatedImages and the deployment's containers.
		want := []string{p.operator.byDigest(), container}
		for _, o := range p.operands {
			want = append(want, o.byDigest())
		}
		slices.Sort(want)
		if got := pkg.Metadata.RelatedImages; !slices.Equal(got, slices.Compact(want)) {
			t.Errorf("%s: related images %v, want %v", p.name, got, want)
		}
	}
}

func TestPrintImagesTable(t *testing.T) {
	rows := newImageRows()
	for name, seconds := range map[string][]float64{rowImgExportImport: {10}, rowImgExport: {4}, rowImgImport: {6}, rowImgRegctl: {20}, rowImgOras: {16}} {
		rows.get(name).seconds = seconds
	}
	var out bytes.Buffer
	printMirrorTable(&out, "", rows)
	line := strings.Fields(strings.Split(out.String(), "\n")[2])
	if got := line[len(line)-1]; got != "met" || !strings.Contains(out.String(), "1.60x") {
		t.Errorf("berth at 10 s against oras at 16 s (target %.2fx):\n%s", imagesSpeedup, out.String())
	}
}

// TestImagesNamespaceApart: the images rows' packages share the source
// with the package rows' corpus, whose selection must not take them in.
func TestImagesNamespaceApart(t *testing.T) {
	for _, p := range mirrorCorpus(500) {
		if p.namespace == imageNamespace {
			t.Fatalf("the corpus has a package in %s, the images rows' namespace: %s", imageNamespace, p.name)
		}
	}
}
