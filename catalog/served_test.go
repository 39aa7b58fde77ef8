package catalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2/registry/remote/errcode"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/registry"
)

// errStrict is the tag admission of namespace "strict": it refuses every tag.
var errStrict = errors.New("strict admits nothing")

// TestOnlyProtectedShapesAreVersions pushes every shape of manifest a pusher
// can send and requires the registry and the catalog to agree, through their
// one definition (pkgformat.ClassifyManifest): a shape the catalog serves as
// a version has an immutable tag and passes tag admission; any other shape
// never appears as a version.
func TestOnlyProtectedShapesAreVersions(t *testing.T) {
	e := newEnv(t, envOptions{admit: func(_ context.Context, push registry.TagPush) error {
		if strings.HasPrefix(push.Repo, "strict/") {
			return errStrict
		}
		return nil
	}})
	kudo := load(t, "kudo/cowsay/0.2.0")
	kudoContent, err := kudo.Archive()
	if err != nil {
		t.Fatal(err)
	}
	kudoArt, err := kudo.Artifact()
	if err != nil {
		t.Fatal(err)
	}
	chart, err := pkgformat.Load(filepath.Join("..", "pkgformat", "testdata", "hello-chart"), pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	chartContent, err := chart.Archive()
	if err != nil {
		t.Fatal(err)
	}
	var (
		berthConfig = layer{pkgformat.ConfigMediaType, kudoArt.Config}
		emptyConfig = layer{ocispec.MediaTypeEmptyJSON, []byte("{}")}
		imageConfig = layer{ocispec.MediaTypeImageConfig, []byte(`{"architecture":"amd64","os":"linux"}`)}
		helmConfig  = layer{pkgformat.HelmConfigMediaType, []byte(`{"apiVersion":"v2","name":"hello","version":"1.2.3+build.5"}`)}
		content     = layer{pkgformat.ContentMediaType, kudoContent}
		chartLayer  = layer{pkgformat.HelmChartContentMediaType, chartContent}
		imageLayer  = layer{ocispec.MediaTypeImageLayerGzip, []byte("an image layer")}
	)
	const cowsay, hello = "cowsay:0.2.0", "hello:1.2.3_build.5"
	tests := []struct {
		name         string
		at           string // name:tag
		artifactType string
		config       layer
		layers       []layer
		version      bool
	}{
		{"berth push", cowsay, pkgformat.ArtifactType, berthConfig, []layer{content}, true},
		{"berth config, no artifactType", cowsay, "", berthConfig, []layer{content}, true},
		{"oras push --artifact-type", cowsay, pkgformat.ArtifactType, emptyConfig, []layer{content}, true},
		{"oras push without --artifact-type", cowsay, "application/vnd.unknown.artifact.v1", emptyConfig, []layer{content}, true},
		{"empty config, no artifactType", cowsay, "", emptyConfig, []layer{content}, true},
		{"content first, then another layer", cowsay, pkgformat.ArtifactType, berthConfig, []layer{content, imageLayer}, true},
		{"helm push", hello, "", helmConfig, []layer{chartLayer}, true},
		{"content as a later layer", cowsay, pkgformat.ArtifactType, berthConfig, []layer{imageLayer, content}, false},
		{"empty config, content as a later layer", cowsay, "", emptyConfig, []layer{imageLayer, content}, false},
		{"image manifest carrying a berth layer", cowsay, "", imageConfig, []layer{content}, false},
		{"berth artifactType, image config", cowsay, pkgformat.ArtifactType, imageConfig, []layer{content}, false},
		{"other artifactType, berth layer", cowsay, "application/vnd.example.thing.v1", emptyConfig, []layer{content}, false},
		{"helm config, berth layer", hello, "", helmConfig, []layer{content}, false},
		{"no layers", cowsay, pkgformat.ArtifactType, berthConfig, nil, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, tag, _ := strings.Cut(tt.at, ":")
			manifest := e.manifestOf(fmt.Sprintf("s%d/%s", i, name), tt.artifactType, tt.config, tt.layers...)
			if got := pkgformat.ClassifyManifest(ocispec.MediaTypeImageManifest, manifest).IsPackage(); got != tt.version {
				t.Fatalf("ClassifyManifest says package %v, the table %v", got, tt.version)
			}
			repo := fmt.Sprintf("s%d/%s", i, name)
			if err := e.putManifest(repo, tag, manifest); err != nil {
				t.Fatalf("push: %v", err)
			}
			wantStatus := apiv1.StatusIgnored
			if tt.version {
				wantStatus = apiv1.StatusIndexed
			}
			e.waitFor("the catalog to read "+repo, func() bool { return e.entry(fmt.Sprintf("s%d", i), name, tag) != nil })
			if en := e.entry(fmt.Sprintf("s%d", i), name, tag); en.Status != wantStatus {
				t.Errorf("catalog status %s (%s), want %s", en.Status, en.Reason, wantStatus)
			}

			other := e.manifestOf(repo, "", imageConfig, imageLayer)
			err := e.putManifest(repo, tag, other)
			if tt.version != isDenied(err) {
				t.Errorf("re-pointing the tag: %v; immutable should be %v", err, tt.version)
			}

			strict := "strict/" + name
			manifest = e.manifestOf(strict, tt.artifactType, tt.config, tt.layers...)
			err = e.putManifest(strict, tag, manifest)
			if tt.version != (isDenied(err) && strings.Contains(err.Error(), errStrict.Error())) {
				t.Errorf("tag admission: %v; refused should be %v", err, tt.version)
			}
			if err == nil {
				e.deleteTagged(strict, tag)
			}
		})
	}
}

// putManifest pushes an image manifest by tag and returns the registry's error.
func (e *env) putManifest(repoName, tag string, manifest []byte) error {
	d := ocispec.Descriptor{MediaType: ocispec.MediaTypeImageManifest, Digest: digest.FromBytes(manifest), Size: int64(len(manifest))}
	return e.repo(repoName).PushReference(e.ctx, d, bytes.NewReader(manifest), tag)
}

// deleteTagged deletes the manifest a tag names.
func (e *env) deleteTagged(repoName, tag string) {
	e.t.Helper()
	repo := e.repo(repoName)
	d, err := repo.Resolve(e.ctx, tag)
	if err == nil {
		err = repo.Delete(e.ctx, d)
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// isDenied reports whether err is the registry's 403 DENIED.
func isDenied(err error) bool {
	var resp *errcode.ErrorResponse
	return errors.As(err, &resp) && resp.StatusCode == 403 && len(resp.Errors) == 1 && resp.Errors[0].Code == "DENIED"
}

// TestConfigClaimsAreNotServed pushes packages whose config blob claims what
// their content does not say: another format, APIs and permissions, a
// description and maintainers, channels. The catalog serves what the content
// says, and searches by the claims find nothing.
func TestConfigClaimsAreNotServed(t *testing.T) {
	e := newEnv(t, envOptions{})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "manifests", "role.yaml"), `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: everything
rules:
  - apiGroups: ["*"]
    resources: ["*"]
    verbs: ["*"]
`)
	plain, err := pkgformat.Load(dir, pkgformat.Options{Name: "widgets", Version: "1.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	lie := func(md pkgformat.Metadata) pkgformat.Metadata {
		md.Format = "weird"
		md.Description = "trust me"
		md.Maintainers = []pkgformat.Maintainer{{Name: "Mallory"}}
		md.ProvidedAPIs = []pkgformat.API{{Group: "kafka.strimzi.io", Version: "v1beta2", Kind: "Kafka"}}
		md.Permissions = &pkgformat.Permissions{Namespaced: []pkgformat.PolicyRule{{Resources: []string{"configmaps"}, Verbs: []string{"get"}}}}
		md.Channels = []pkgformat.Channel{{Name: "stable", Replaces: "widgets.v0.9.0"}}
		md.DefaultChannel = "stable"
		return md
	}
	for _, p := range []*pkgformat.Package{plain, load(t, "kudo/cowsay/0.2.0")} {
		t.Run(string(p.Metadata.Format), func(t *testing.T) {
			art, err := p.Artifact()
			if err != nil {
				t.Fatal(err)
			}
			config, err := json.Marshal(lie(p.Metadata))
			if err != nil {
				t.Fatal(err)
			}
			repo, tag := "lies/"+p.Metadata.Name, pkgformat.Tag(p.Metadata.Version)
			e.pushArtifact(repo, tag, pkgformat.ArtifactType, pkgformat.ConfigMediaType, config, layer{pkgformat.ContentMediaType, art.Content})
			e.waitFor(repo, func() bool { return e.entry("lies", p.Metadata.Name, tag) != nil })
			v, err := e.cat.Version(e.ctx, all, "lies", p.Metadata.Name, tag)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(v.Metadata, p.Metadata) || v.Format != p.Metadata.Format || !reflect.DeepEqual(v.Permissions, p.Metadata.Permissions) {
				t.Errorf("served\n%+v (format %s, permissions %+v)\nwant what the content says\n%+v", v.Metadata, v.Format, v.Permissions, p.Metadata)
			}
		})
	}
	if got := plain.Metadata.Permissions; got == nil || len(got.Cluster) != 1 || got.Cluster[0].Verbs[0] != "*" {
		t.Fatalf("the plain package's content asks for %+v, want the ClusterRole's */*/*", got)
	}
	// The search index follows the store: wait until it has both packages
	// before asking it what they provide.
	var res *catalog.SearchResult
	e.waitFor("both packages searchable", func() bool {
		var err error
		res, err = e.cat.Search(e.ctx, catalog.Query{Namespace: "lies", Access: all})
		if err != nil {
			t.Fatal(err)
		}
		return res.Total == 2
	})
	claimed, err := e.cat.Search(e.ctx, catalog.Query{Provides: catalog.APIFilter{Group: "kafka.strimzi.io", Kind: "Kafka"}, Access: all})
	if err != nil || claimed.Total != 0 {
		t.Errorf("search by a claimed API: %+v, %v; want nothing", claimed, err)
	}
	if _, ok := res.Facets.Format["weird"]; ok || res.Facets.Format["plain"] != 1 || res.Facets.Format["kudo"] != 1 {
		t.Errorf("format facets %v, want plain and kudo from the content", res.Facets.Format)
	}
}

// writeFile writes data at path, creating its folder.
func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
