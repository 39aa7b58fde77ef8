package registry

import (
	"context"
	"io"
	"regexp"

	"github.com/distribution/distribution/v3/registry/api/errcode"

	"github.com/berth-registry/berth/pkgformat"
)

// The registry does not decide who may do what; the HTTP layer in front of
// it does (auth.Registry). These hooks let that layer narrow what one
// request may do or see, through the request's context, which distribution
// hands down to the manifest service and the namespace.

type signOnlyKey struct{}

// WithSignOnly marks a manifest push as made by a subject who may sign but
// not push. The registry then stores only what signs an existing version: a
// manifest that is no package version (pkgformat.ClassifyManifest), pushed
// under a cosign signature, attestation or SBOM tag (sha256-<hex>.sig, .att,
// .sbom) or by digest with a subject (a referrer). It refuses anything else
// with an OCI DENIED error (HTTP 403).
func WithSignOnly(ctx context.Context) context.Context {
	return context.WithValue(ctx, signOnlyKey{}, true)
}

func isSignOnly(ctx context.Context) bool {
	v, _ := ctx.Value(signOnlyKey{}).(bool)
	return v
}

// cosignTagRegexp is cosign's tag of a signature, attestation or SBOM of the
// manifest whose digest it spells.
var cosignTagRegexp = regexp.MustCompile(`^sha256-[0-9a-f]{64}\.(sig|att|sbom)$`)

// checkSignOnly refuses what a sign-only push may not store: a package
// version, a tag other than cosign's, a manifest by digest without a subject.
func checkSignOnly(tag, mediaType string, payload []byte, hasSubject bool) error {
	if c := pkgformat.ClassifyManifest(mediaType, payload); c.IsPackage() {
		return errcode.ErrorCodeDenied.WithMessage("signing rights do not cover pushing a package version; that takes push rights")
	}
	switch {
	case tag != "" && !cosignTagRegexp.MatchString(tag):
		return errcode.ErrorCodeDenied.WithMessage("signing rights cover only cosign's sha256-<hex>.sig, .att and .sbom tags, not tag " + tag + "; other tags take push rights")
	case tag == "" && !hasSubject:
		return errcode.ErrorCodeDenied.WithMessage("signing rights cover a manifest pushed by digest only when it has a subject (a referrer); other manifests take push rights")
	}
	return nil
}

type repositoryFilterKey struct{}

// WithRepositoryFilter makes GET /v2/_catalog list only the repositories
// keep keeps, paginated over them (n, last and the Link header) as
// distribution paginates the whole listing.
func WithRepositoryFilter(ctx context.Context, keep func(repo string) bool) context.Context {
	return context.WithValue(ctx, repositoryFilterKey{}, keep)
}

// Repositories fills repos with the repositories after last, in order, as
// distribution's namespace does, keeping only those the context's
// repository filter keeps when it has one. It walks the namespace from last
// on, once, until repos is full or the namespace ends: io.EOF (or the
// storage's path-not-found error for an empty registry) when it ends first.
func (n *guardedNamespace) Repositories(ctx context.Context, repos []string, last string) (int, error) {
	keep, ok := ctx.Value(repositoryFilterKey{}).(func(string) bool)
	if !ok {
		return n.Namespace.Repositories(ctx, repos, last)
	}
	buf := make([]string, len(repos))
	filled := 0
	for {
		got, err := n.Namespace.Repositories(ctx, buf, last)
		for _, repo := range buf[:got] {
			if keep(repo) {
				repos[filled] = repo
				filled++
				if filled == len(repos) {
					return filled, nil
				}
			}
		}
		if err != nil {
			return filled, err
		}
		if got == 0 {
			return filled, io.EOF
		}
		last = buf[got-1]
	}
}
