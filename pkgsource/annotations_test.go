package pkgsource

import (
	"encoding/json"
	"reflect"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestAnnotations(t *testing.T) {
	git := Built{Resolved: Resolved{Kind: Git, URL: "https://git.example.com/op.git", Ref: "refs/tags/v1.0.0", Revision: "0123abc", Dir: "deploy"}}
	tarball := Built{Resolved: Resolved{Kind: HTTP, URL: "https://example.com/crds.tgz", Revision: `"etag-1"`}, Destination: "manifests/crds"}

	one, err := Annotations([]Built{git})
	if err != nil {
		t.Fatal(err)
	}
	if one[ocispec.AnnotationSource] != git.URL || one[ocispec.AnnotationRevision] != git.Revision {
		t.Errorf("single source annotations: %v", one)
	}
	want := `[{"kind":"git","url":"https://git.example.com/op.git","ref":"refs/tags/v1.0.0","revision":"0123abc","dir":"deploy"}]`
	if one[AnnotationSources] != want {
		t.Errorf("%s = %s, want %s", AnnotationSources, one[AnnotationSources], want)
	}

	two, err := Annotations([]Built{git, tarball})
	if err != nil {
		t.Fatal(err)
	}
	if len(two) != 1 {
		t.Errorf("two sources have no single source or revision, got %v", two)
	}
	var back []Built
	if err := json.Unmarshal([]byte(two[AnnotationSources]), &back); err != nil || !reflect.DeepEqual(back, []Built{git, tarball}) {
		t.Errorf("%s does not read back (%v): %s", AnnotationSources, err, two[AnnotationSources])
	}
}
