package pkgsource

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-registry/berth/internal/gittest"
)

func TestListTags(t *testing.T) {
	f := newGitFixture(t)
	gittest.Run(t, f.work, "tag", "v2.0.0", f.first)
	gittest.Run(t, f.work, "tag", "release-3", f.first)
	ctx := context.Background()
	l := Limits{AllowPrivate: true}
	got, err := ListTags(ctx, Spec{Kind: Git, URL: f.url, Dir: "bundle"}, "v*", l)
	if err != nil {
		t.Fatal(err)
	}
	want := []Resolved{
		{Kind: Git, URL: f.url, Ref: "refs/tags/v1", Revision: f.v1, Dir: "bundle"},
		{Kind: Git, URL: f.url, Ref: "refs/tags/v2.0.0", Revision: f.first, Dir: "bundle"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ListTags = %+v, want %+v (annotated tags peeled, other tags left out)", got, want)
	}

	if _, err := ListTags(ctx, Spec{Kind: Git, URL: f.authURL}, "v*", l); !errors.Is(err, ErrDenied) {
		t.Errorf("without credentials: %v, want ErrDenied", err)
	}
	creds := Credentials{Username: gittest.User, Password: "s3cret"}
	if got, err := ListTags(ctx, Spec{Kind: Git, URL: f.authURL, Credentials: creds}, "v1", l); err != nil || len(got) != 1 {
		t.Errorf("with credentials: %+v, %v; want the tag v1", got, err)
	}
	if _, err := ListTags(ctx, Spec{Kind: Git, URL: f.url}, "v*", Limits{}); !errors.Is(err, ErrDenied) {
		t.Errorf("loopback without AllowPrivate: %v, want ErrDenied", err)
	}
	if _, err := ListTags(ctx, Spec{Kind: Git, URL: f.url}, "v[", l); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad pattern: %v, want ErrInvalid", err)
	}
}

func TestCheckSpec(t *testing.T) {
	for _, tc := range []struct {
		spec Spec
		want string
	}{
		{Spec{Kind: Git, URL: "https://example.com/r.git", Ref: "v*", Dir: "deploy"}, ""},
		{Spec{Kind: Image, URL: "quay.io/org/bundle:v1"}, ""},
		{Spec{URL: "https://example.com/r.git"}, "kind: missing"},
		{Spec{Kind: "svn", URL: "https://example.com/r"}, `kind: "svn" is not a kind of source`},
		{Spec{Kind: HTTP}, "url: missing: want the tarball's URL"},
		{Spec{Kind: Git, URL: "git@example.com:r.git"}, "is not an http(s) URL"},
		{Spec{Kind: HTTP, URL: "https://u:pw@example.com/x.tgz"}, `url: "https://u:xxxxx@example.com/x.tgz" holds credentials`},
		{Spec{Kind: HTTP, URL: "https://example.com/x.tgz", Ref: "main"}, "ref: only a git source has a ref"},
		{Spec{Kind: Git, URL: "https://example.com/r.git", Ref: "v[1"}, `ref: "v[1" is not a valid tag pattern`},
		{Spec{Kind: Image, URL: "quay.io/org/b:v1", Dir: "x"}, "dir: an image source has no directory"},
		{Spec{Kind: Git, URL: "https://example.com/r.git", Dir: "../up"}, `dir: "../up" must stay inside`},
		{Spec{Kind: Git, URL: "https://example.com/r.git", Destination: "/abs"}, `destination: "/abs" must be a relative`},
	} {
		err := CheckSpec(tc.spec)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("CheckSpec(%+v) = %v, want %q", tc.spec, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "pw") {
			t.Errorf("CheckSpec(%+v) = %v: prints the password", tc.spec, err)
		}
	}
}
