package pkgsource

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"
)

// CheckSpec refuses a source that cannot be fetched as written, naming
// its key: "url: ...", "ref: ...". berth import and the configuration's
// tracked sources check theirs with it.
func CheckSpec(s Spec) error {
	switch s.Kind {
	case Git, HTTP, Image:
	case "":
		return errors.New("kind: missing: want git, http or image")
	default:
		return fmt.Errorf("kind: %q is not a kind of source: want git, http or image", s.Kind)
	}
	if s.URL == "" {
		return fmt.Errorf("url: missing: want the %s", map[Kind]string{
			Git: "repository's URL", HTTP: "tarball's URL", Image: "image reference (host/repository:tag)"}[s.Kind])
	}
	if s.Kind != Image {
		u, err := url.Parse(s.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return fmt.Errorf("url: %q is not an http(s) URL", s.URL)
		}
		if u.User != nil {
			return fmt.Errorf("url: %q holds credentials: give them apart from the URL (berth import --username and --password-stdin, a source's credentials files)", u.Redacted())
		}
	}
	if s.Ref != "" && s.Kind != Git {
		return fmt.Errorf("ref: only a git source has a ref (the %s source names its version in its url)", s.Kind)
	}
	if IsPattern(s.Ref) {
		if _, err := path.Match(s.Ref, ""); err != nil {
			return fmt.Errorf("ref: %q is not a valid tag pattern: %v", s.Ref, err)
		}
	}
	if s.Dir != "" && s.Kind == Image {
		return errors.New("dir: an image source has no directory: its content is the package")
	}
	for _, key := range []string{"dir", "destination"} {
		p := s.Dir
		if key == "destination" {
			p = s.Destination
		}
		if err := checkRelative(p); err != nil {
			return fmt.Errorf("%s: %q %w", key, p, err)
		}
	}
	return nil
}

// checkRelative refuses a path that is not a slash-separated path inside
// the directory it is relative to.
func checkRelative(p string) error {
	if p == "" {
		return nil
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, `\`) {
		return errors.New("must be a relative slash-separated path")
	}
	if slices.Contains(strings.Split(path.Clean(p), "/"), "..") {
		return errors.New("must stay inside the directory: no ..")
	}
	return nil
}
