package catalog_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// pushPlain pushes, as `oras push` would, a plain package of files.
func (e *env) pushPlain(repo, tag string, files map[string]string) {
	e.t.Helper()
	e.pushArtifact(repo, tag, pkgformat.ArtifactType, ocispec.MediaTypeEmptyJSON, []byte("{}"),
		layer{pkgformat.ContentMediaType, tarball(e.t, files)})
}

// waitInvalid waits until ns/name:tag is indexed invalid and returns its reason.
func (e *env) waitInvalid(ns, name, tag string) string {
	e.t.Helper()
	var reason string
	e.waitFor(ns+"/"+name+":"+tag+" invalid", func() bool {
		en := e.entry(ns, name, tag)
		if en != nil && en.Status == apiv1.StatusInvalid {
			reason = en.Reason
		}
		return reason != ""
	})
	return reason
}

func TestHostileYAMLIsInvalidWhileANormalPushStaysSearchable(t *testing.T) {
	e := newEnv(t, envOptions{})
	const hostile = 6
	for i := range hostile {
		e.pushPlain(fmt.Sprintf("hostile/h%d", i), "1.0.0", map[string]string{"README.md": "x\n", "manifests/docs.yaml": hostileDocs})
	}
	e.pushSearchable("kudo", load(t, "kudo/cowsay/0.2.0"))
	for i := range hostile {
		reason := e.waitInvalid("hostile", fmt.Sprintf("h%d", i), "1.0.0")
		if !strings.Contains(reason, "manifests/docs.yaml: more than 10000 YAML documents in one file (MaxYAMLDocuments)") {
			t.Errorf("h%d: reason %q does not name the limit", i, reason)
		}
	}
}

// hostileDocs is the content of the push: 29 KB compressed, 16 MiB
// of tiny YAML documents.
var hostileDocs = strings.Repeat("---\na: 1\n", (16<<20)/9)

// pushSearchable pushes p to namespace and waits until search finds it; it
// returns how long that took from the push.
func (e *env) pushSearchable(namespace string, p *pkgformat.Package) time.Duration {
	e.t.Helper()
	start := time.Now()
	dgst := e.pushPackage(namespace, p)
	e.waitFor(p.Metadata.Name+" in search", func() bool {
		res, err := e.cat.Search(e.ctx, catalog.Query{Text: p.Metadata.Name, Namespace: namespace, Access: all})
		return err == nil && len(res.Packages) == 1 && res.Packages[0].Digest == dgst
	})
	return time.Since(start)
}

// BenchmarkSearchableBehindHostilePushes measures how long a normal push
// takes to be searchable, alone and right after six pushes of the issue's
// hostile package (which the catalog refuses meanwhile).
func BenchmarkSearchableBehindHostilePushes(b *testing.B) {
	for _, hostile := range []int{0, 6} {
		b.Run(fmt.Sprintf("hostile=%d", hostile), func(b *testing.B) {
			e := newEnv(b, envOptions{})
			p, err := pkgformat.Load(filepath.Join(fixtures, "kudo/cowsay/0.2.0"), pkgformat.Options{})
			if err != nil {
				b.Fatal(err)
			}
			var took []time.Duration
			for i := 0; b.Loop(); i++ {
				for j := range hostile {
					e.pushPlain(fmt.Sprintf("hostile%d/h%d", i, j), "1.0.0", map[string]string{"README.md": "x\n", "manifests/docs.yaml": hostileDocs})
				}
				took = append(took, e.pushSearchable(fmt.Sprintf("ns%d", i), p))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-to-searchable-p50")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "ms-to-searchable-max")
		})
	}
}

func TestPackageThatTakesTooLongIsInvalid(t *testing.T) {
	e := newEnv(t, envOptions{indexTimeout: 20 * time.Millisecond})
	files := map[string]string{"README.md": "x\n"}
	for i := range 20 {
		files[fmt.Sprintf("manifests/m%d.yaml", i)] = strings.Repeat("---\na: 1\n", 9000)
	}
	e.pushPlain("slow/pkg", "1.0.0", files)
	reason := e.waitInvalid("slow", "pkg", "1.0.0")
	if !strings.Contains(reason, "indexing took longer than the 20ms limit (catalog.indexTimeout)") {
		t.Errorf("reason %q does not name the timeout", reason)
	}
}
