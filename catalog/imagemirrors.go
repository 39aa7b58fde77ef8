package catalog

import (
	"fmt"
	"strings"

	"github.com/distribution/reference"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// Image mirrors record where the images of source repositories live at this
// site (docs/catalog.md, "Images"): berth mirror import records them, and the
// images endpoint, berth show, the UI's install snippets and the
// installable check read them.

// MaxImageMirrors bounds how many image mirrors the catalog records, and
// how many one request may set.
const MaxImageMirrors = 10000

// ImageRef is an image reference split into its repository, tag and digest,
// as the search filter and the store's rows hold it.
type ImageRef struct {
	// Repository is the normalised name without tag or digest
	// (docker.io/library/nginx).
	Repository string
	// Tag and Digest are empty when the reference has none.
	Tag, Digest string
}

// String is the reference: Repository[:Tag][@Digest].
func (r ImageRef) String() string {
	s := r.Repository
	if r.Tag != "" {
		s += ":" + r.Tag
	}
	if r.Digest != "" {
		s += "@" + r.Digest
	}
	return s
}

// ParseImageRef parses a reference, normalising it (nginx is
// docker.io/library/nginx). Its error wraps ErrInvalid and says why.
func ParseImageRef(s string) (ImageRef, error) {
	r, err := parseImageRef(s)
	if err != nil {
		return ImageRef{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return r, nil
}

// parseImageRef is ParseImageRef, its error saying why without a sentinel.
func parseImageRef(s string) (ImageRef, error) {
	named, err := reference.ParseNormalizedNamed(s)
	if err != nil {
		return ImageRef{}, fmt.Errorf("%q is not an image reference: %v", s, err)
	}
	r := ImageRef{Repository: reference.TrimNamed(named).String()}
	if t, ok := named.(reference.Tagged); ok {
		r.Tag = t.Tag()
	}
	if d, ok := named.(reference.Digested); ok {
		r.Digest = d.Digest().String()
	}
	return r, nil
}

// Host is the registry host of the repository (quay.io, 127.0.0.1:5000).
func (r ImageRef) Host() string {
	host, _, _ := strings.Cut(r.Repository, "/")
	return host
}

// Path is the repository without its host (org/img).
func (r ImageRef) Path() string {
	_, path, _ := strings.Cut(r.Repository, "/")
	return path
}

// Mirrors finds the mirror of a repository among recorded image mirrors:
// the longest Source that is the repository or a prefix of it by whole
// path components wins.
type Mirrors map[string]string

// NewMirrors indexes recorded mirrors by Source.
func NewMirrors(ms []apiv1.ImageMirror) Mirrors {
	m := make(Mirrors, len(ms))
	for _, x := range ms {
		m[x.Source] = x.Mirror
	}
	return m
}

// Location returns where the image r lives at this site: the mirror
// repository that replaces the longest matching Source, with r's digest or,
// without one, its tag; false when no mirror covers r's repository.
func (m Mirrors) Location(r ImageRef) (ImageRef, bool) {
	repo := r.Repository
	for prefix := repo; prefix != ""; {
		if mirror, ok := m[prefix]; ok {
			loc := ImageRef{Repository: mirror + repo[len(prefix):], Digest: r.Digest}
			if loc.Digest == "" {
				loc.Tag = r.Tag
			}
			return loc, true
		}
		i := strings.LastIndexByte(prefix, '/')
		if i < 0 {
			break
		}
		prefix = prefix[:i]
	}
	return ImageRef{}, false
}

// CheckImageMirrors checks mirrors to be recorded: at most MaxImageMirrors,
// each Source a normalised repository or prefix of repositories (quay.io,
// quay.io/org or quay.io/org/img), each Mirror host[:port] with an optional
// path, no Source twice. Its error wraps ErrInvalid and names the first bad
// entry and what to change.
func CheckImageMirrors(ms []apiv1.ImageMirror) error {
	if len(ms) > MaxImageMirrors {
		return errorf(ErrInvalid, "%d image mirrors, the limit is %d", len(ms), MaxImageMirrors)
	}
	seen := make(map[string]int, len(ms))
	for i, m := range ms {
		if err := checkRepositoryPrefix(m.Source); err != nil {
			return errorf(ErrInvalid, "mirrors[%d].source: %v", i, err)
		}
		if err := checkRepositoryPrefix(m.Mirror); err != nil {
			return errorf(ErrInvalid, "mirrors[%d].mirror (source %s): %v", i, m.Source, err)
		}
		if j, dup := seen[m.Source]; dup {
			return errorf(ErrInvalid, "mirrors[%d].source %s is also mirrors[%d]'s: give each source once", i, m.Source, j)
		}
		seen[m.Source] = i
	}
	return nil
}

// checkRepositoryPrefix checks that s is a registry host or a repository
// under one, written in full (docker.io/library/nginx, not nginx), without
// tag or digest. A prefix need not be a repository Docker would normalise
// to itself: docker.io/library covers docker.io/library/nginx.
func checkRepositoryPrefix(s string) error {
	if s == "" {
		return fmt.Errorf("is empty: give a registry host or repository, e.g. quay.io/org")
	}
	if len(s) > reference.NameTotalLengthMax {
		return fmt.Errorf("is %d bytes long, the limit is %d", len(s), reference.NameTotalLengthMax)
	}
	probe := s
	if !strings.Contains(s, "/") {
		// A host alone: a repository under it must parse with it as its domain.
		probe = s + "/x"
	}
	ref, err := reference.Parse(probe)
	if err != nil {
		return fmt.Errorf("%q is not a repository: %v", s, err)
	}
	named, ok := ref.(reference.Named)
	if !ok || !reference.IsNameOnly(named) {
		return fmt.Errorf("%q has a tag or digest: give the repository alone", s)
	}
	if host := reference.Domain(named); !pkgformat.LooksLikeRegistryHost(host) {
		if n, err := reference.ParseNormalizedNamed(s); err == nil && probe == s {
			return fmt.Errorf("%q does not start with a registry host: write %s", s, n.String())
		}
		return fmt.Errorf("%q is not a registry host: give one with a dot or a port, e.g. quay.io or localhost:5000", s)
	}
	return nil
}
