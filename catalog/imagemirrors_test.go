package catalog_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
)

func TestMirrorsLocation(t *testing.T) {
	m := catalog.NewMirrors([]apiv1.ImageMirror{
		{Source: "quay.io", Mirror: "berth.example/q"},
		{Source: "quay.io/org", Mirror: "berth.example/mirror/org"},
		{Source: "quay.io/org/special", Mirror: "localhost:5000/special"},
		{Source: "docker.io/library", Mirror: "berth.example/hub"},
	})
	d := "sha256:" + strings.Repeat("a", 64)
	for _, tc := range []struct{ ref, want string }{
		{"quay.io/org/img:1.0", "berth.example/mirror/org/img:1.0"},
		{"quay.io/org/img:1.0@" + d, "berth.example/mirror/org/img@" + d}, // by digest, the tag dropped
		{"quay.io/org/special@" + d, "localhost:5000/special@" + d},       // the longest source wins
		{"quay.io/org/special/sub:2", "localhost:5000/special/sub:2"},
		{"quay.io/organisation/img:1", "berth.example/q/organisation/img:1"}, // whole components only
		{"quay.io/other/img", "berth.example/q/other/img"},                   // no tag: as written
		{"nginx:1.25", "berth.example/hub/nginx:1.25"},
		{"ghcr.io/org/img:1", ""},
	} {
		r, err := catalog.ParseImageRef(tc.ref)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if loc, ok := m.Location(r); ok {
			got = loc.String()
		}
		if got != tc.want {
			t.Errorf("Location(%s) = %q, want %q", tc.ref, got, tc.want)
		}
	}
}

func TestCheckImageMirrors(t *testing.T) {
	for _, good := range []apiv1.ImageMirror{
		{Source: "quay.io", Mirror: "localhost:5000"},
		{Source: "docker.io/library", Mirror: "mirror.example:5000/hub"},
		{Source: "registry.k8s.io/ingress-nginx/controller", Mirror: "127.0.0.1:5001/k8s/controller"},
	} {
		if err := catalog.CheckImageMirrors([]apiv1.ImageMirror{good}); err != nil {
			t.Errorf("%+v refused: %v", good, err)
		}
	}
	for _, tc := range []struct {
		m    apiv1.ImageMirror
		want string
	}{
		{apiv1.ImageMirror{Source: "nginx", Mirror: "localhost:5000/x"}, "mirrors[0].source: \"nginx\" is not a registry host"},
		{apiv1.ImageMirror{Source: "org/img", Mirror: "localhost:5000/x"}, "write docker.io/org/img"},
		{apiv1.ImageMirror{Source: "quay.io/org/img:1.0", Mirror: "localhost:5000/x"}, "has a tag or digest"},
		{apiv1.ImageMirror{Source: "quay.io/Org", Mirror: "localhost:5000/x"}, "not a repository"},
		{apiv1.ImageMirror{Source: "quay.io/org", Mirror: "https://mirror.example/x"}, "mirrors[0].mirror (source quay.io/org)"},
		{apiv1.ImageMirror{Source: "quay.io/org", Mirror: ""}, "is empty"},
		{apiv1.ImageMirror{Source: "quay.io/" + strings.Repeat("a", 300), Mirror: "localhost:5000/x"}, "the limit is 255"},
		{apiv1.ImageMirror{Source: "quay.io/org\n", Mirror: "localhost:5000/x"}, "not a repository"},
	} {
		err := catalog.CheckImageMirrors([]apiv1.ImageMirror{tc.m})
		if !errors.Is(err, catalog.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", tc.m, err, tc.want)
		}
	}
}
