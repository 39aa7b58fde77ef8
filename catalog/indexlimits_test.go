package catalog_test

import (
	"fmt"
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
		layer{pkgformat.ContentMediaType, tarball(e.t.(*testing.T), files)})
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
	// 29 KB compressed, 16 MiB of tiny documents: the push of the issue.
	docs := strings.Repeat("---\na: 1\n", (16<<20)/9)
	const hostile = 6
	for i := range hostile {
		e.pushPlain(fmt.Sprintf("hostile/h%d", i), "1.0.0", map[string]string{"README.md": "x\n", "manifests/docs.yaml": docs})
	}
	start := time.Now()
	p := load(t, "kudo/cowsay/0.2.0")
	dgst := e.pushPackage("kudo", p)
	e.waitFor("cowsay in search", func() bool {
		res, err := e.cat.Search(e.ctx, catalog.Query{Text: "cowsay", Access: all})
		return err == nil && len(res.Packages) == 1 && res.Packages[0].Digest == dgst
	})
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a normal push took %s to be searchable behind %d hostile ones", took, hostile)
	}
	for i := range hostile {
		reason := e.waitInvalid("hostile", fmt.Sprintf("h%d", i), "1.0.0")
		if !strings.Contains(reason, "manifests/docs.yaml: more than 10000 YAML documents in one file (MaxYAMLDocuments)") {
			t.Errorf("h%d: reason %q does not name the limit", i, reason)
		}
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
