package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/distribution/reference"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/signing"
)

// InstallableReader says whether a version can install at a berth's site;
// *client.Catalog implements it. Its method may be called concurrently.
type InstallableReader interface {
	Installable(ctx context.Context, namespace, name, version string) (*apiv1.Installable, error)
}

// CheckCatalog is the part of a far berth's catalog API CheckInstall reads:
// what Resolve reads, and each version's installable answer.
type CheckCatalog interface {
	CatalogReader
	InstallableReader
}

var _ CheckCatalog = (*client.Catalog)(nil)

// SignatureFetchers give a signing.Fetcher for a registry host[:port];
// *client.Client implements them.
type SignatureFetchers interface {
	Fetcher(registryHost string) signing.Fetcher
}

var _ SignatureFetchers = (*client.Client)(nil)

// ErrNotBerth is the error of CheckInstall when the far registry does not
// answer berth's catalog API.
var ErrNotBerth = errors.New("FAR does not answer berth's catalog API; mirror check needs a berth")

// CheckOptions say what CheckInstall checks, and where.
type CheckOptions struct {
	// Catalog is the far berth's catalog API.
	Catalog CheckCatalog
	// Selection chooses the versions to check, as for Export.
	Selection *Selection
	// Policy, when not nil, is a trust policy each image's signature is
	// verified against, at the image's mirror, by the rule whose glob
	// matches the image's source repository (quay.io/org/*). Images no rule
	// covers keep the far berth's answer.
	Policy *signing.Policy
	// Fetchers read the mirrors' signatures; required with Policy.
	Fetchers SignatureFetchers
	// Concurrency is how many versions are checked at once; if <= 0,
	// DefaultConcurrency.
	Concurrency int
}

// CheckReport is what CheckInstall found, and what berth mirror check
// --format json prints.
type CheckReport struct {
	// Versions are the far berth's answers, in the Resolution's order, with
	// what the client-side policy check found added.
	Versions []apiv1.Installable `json:"versions"`
	// Installable and NotInstallable count Versions.
	Installable    int `json:"installable"`
	NotInstallable int `json:"notInstallable"`
	// Warnings are the Resolution's.
	Warnings []string `json:"warnings,omitempty"`
}

// CheckInstall resolves opts.Selection against the far berth's catalog and
// asks it, for each version chosen, whether everything the version needs
// to install is there and its signatures verify (GET …/installable). With
// opts.Policy each image present at its mirror is also verified there,
// offline, by the client: an image a rule requiring signatures covers and
// no trusted signature verifies makes its version not installable.
//
// A version the far berth cannot answer for is reported not installable,
// with the error as its problem; the others are still checked. Errors are
// ErrNotBerth (wrapping the catalog's error) when the far registry does
// not answer the catalog API, Resolve's other errors, and a Policy without
// Fetchers.
func CheckInstall(ctx context.Context, opts CheckOptions) (*CheckReport, error) {
	if opts.Policy != nil && opts.Fetchers == nil {
		return nil, errors.New("mirror check: a trust policy needs Fetchers to read the mirrors' signatures")
	}
	cat := &answeredCatalog{CatalogReader: opts.Catalog}
	res, err := Resolve(ctx, cat, opts.Selection)
	if err != nil && !cat.answered.Load() && (errors.Is(err, client.ErrRegistry) || errors.Is(err, client.ErrNotFound)) {
		// The first request is a search, which a berth answers with its own
		// JSON, never a 404: this is another registry, or something in
		// front of one.
		return nil, fmt.Errorf("%w (%w)", ErrNotBerth, err)
	}
	if err != nil {
		return nil, err
	}
	report := &CheckReport{Versions: make([]apiv1.Installable, len(res.Versions)), Warnings: res.Warnings}
	indices := make([]int, len(res.Versions))
	for i := range indices {
		indices[i] = i
	}
	forEach(ctx, opts.Concurrency, indices, func(i int) {
		report.Versions[i] = checkVersion(ctx, opts, res.Versions[i])
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for _, v := range report.Versions {
		if v.Installable {
			report.Installable++
		} else {
			report.NotInstallable++
		}
	}
	return report, nil
}

// checkVersion asks the far berth about s, and checks its images'
// signatures with opts.Policy. The answer is trusted only as far as it
// agrees with itself: a version the answer says is installable while it
// lists a problem, or an image not present, is not.
func checkVersion(ctx context.Context, opts CheckOptions, s Selected) apiv1.Installable {
	inst, err := opts.Catalog.Installable(ctx, s.Namespace, s.Name, s.Version)
	if err != nil {
		return apiv1.Installable{Namespace: s.Namespace, Name: s.Name, Version: s.Version,
			Problems: []string{"the far berth cannot say: " + err.Error()}}
	}
	out := *inst
	out.Namespace, out.Name, out.Version = s.Namespace, s.Name, s.Version
	for i := range out.Images {
		img := &out.Images[i]
		if !img.Present && !mentions(out.Problems, img.Reference) {
			out.Problems = append(out.Problems, imageProblem(*img, "not present: "+cmp.Or(img.Reason, "the far berth says so")))
		}
		if opts.Policy != nil {
			if p := verifyAtMirror(ctx, opts, img); p != "" {
				out.Problems = append(out.Problems, p)
			}
		}
	}
	out.Installable = out.Installable && len(out.Problems) == 0
	return out
}

// answeredCatalog is a CatalogReader that records whether it answered
// once, so that an error of the first request, which is a search, can be
// told from one of a berth that answered.
type answeredCatalog struct {
	CatalogReader
	answered atomic.Bool
}

func (c *answeredCatalog) SearchAll(ctx context.Context, opts client.SearchOptions) (*apiv1.SearchResponse, error) {
	res, err := c.CatalogReader.SearchAll(ctx, opts)
	if err == nil {
		c.answered.Store(true)
	}
	return res, err
}

// mentions reports whether a problem names ref.
func mentions(problems []string, ref string) bool {
	for _, p := range problems {
		if strings.Contains(p, ref) {
			return true
		}
	}
	return false
}

// imageProblem is a problem line naming img and where it was looked for.
func imageProblem(img apiv1.ImageCheck, what string) string {
	if img.Mirror != "" {
		return fmt.Sprintf("image %s (at %s): %s", img.Reference, img.Mirror, what)
	}
	return fmt.Sprintf("image %s: %s", img.Reference, what)
}

// verifyAtMirror verifies img's signatures at its mirror with the rule of
// opts.Policy covering its source repository, and records what it found
// in img. It returns a problem when the rule requires a signature none
// verifies, or the mirror cannot be read; "" otherwise, and for an image
// not present or no rule covers.
func verifyAtMirror(ctx context.Context, opts CheckOptions, img *apiv1.ImageCheck) string {
	if !img.Present || img.Mirror == "" {
		return ""
	}
	src, err := reference.ParseNormalizedNamed(img.Reference)
	if err != nil {
		return imageProblem(*img, "not an image reference: "+err.Error())
	}
	srcRepo := reference.TrimNamed(src).Name()
	rule, covered := opts.Policy.ForImage(srcRepo)
	if !covered {
		return ""
	}
	at, err := reference.ParseNormalizedNamed(img.Mirror)
	if err != nil {
		return imageProblem(*img, "its mirror is not an image reference: "+err.Error())
	}
	host, repo := reference.Domain(at), reference.Path(at)
	f := opts.Fetchers.Fetcher(host)
	var subject string
	switch r := at.(type) {
	case reference.Digested:
		subject = r.Digest().String()
	case reference.Tagged:
		if subject, err = f.Resolve(ctx, repo, r.Tag()); err != nil {
			return imageProblem(*img, "cannot resolve its tag at the mirror: "+err.Error())
		}
	default:
		return imageProblem(*img, "its mirror names neither a tag nor a digest")
	}
	// The rule is the source repository's; the signatures are read at the
	// mirror's.
	rep, err := signing.CheckImage(ctx, f, opts.Policy, srcRepo, repo, subject)
	if err != nil {
		return imageProblem(*img, "cannot read its signatures at the mirror: "+err.Error())
	}
	img.Signed, img.Verified = len(rep.Signatures) > 0, rep.Verified()
	if !img.Verified && rule.Require {
		img.Reason = "signature not verified by the trust policy: " + rep.Reason()
		return imageProblem(*img, img.Reason)
	}
	return ""
}
