package pkgsource

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// IsPattern reports whether a git ref is a tag pattern ("v*"): a ref
// with path.Match wildcards, every matching tag of which is a version.
func IsPattern(ref string) bool {
	return strings.ContainsAny(ref, `*?[`)
}

// ListTags lists the tags of the git source s whose names match pattern
// (path.Match, "v*"), with one ls-remote bounded as Resolve is: for each
// its ref (refs/tags/<name>) and the commit it points at (peeled, for an
// annotated tag), sorted by ref. s.Ref is not read.
func ListTags(ctx context.Context, s Spec, pattern string, l Limits) ([]Resolved, error) {
	l = l.withDefaults()
	src := s.name()
	if s.Kind != Git {
		return nil, fmt.Errorf("%s: only a git source has tags: %w", src, ErrInvalid)
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("%s: tag pattern %q: %v: %w", src, pattern, err, ErrInvalid)
	}
	if err := checkGitURL(src, s.URL); err != nil {
		return nil, err
	}
	ctx, cancel := withTimeout(ctx, src, l)
	defer cancel()
	ctx, sess := gitContext(ctx, src, l)
	defer sess.close()
	byName, err := listRefs(ctx, s, src)
	if err != nil {
		return nil, ctxErr(ctx, err)
	}
	var out []Resolved
	for name, ref := range byName {
		if !name.IsTag() || strings.HasSuffix(string(name), "^{}") || ref.Type() != plumbing.HashReference {
			continue
		}
		if ok, _ := path.Match(pattern, name.Short()); !ok {
			continue
		}
		hash := ref.Hash()
		if peeled, ok := byName[name+"^{}"]; ok {
			hash = peeled.Hash()
		}
		out = append(out, Resolved{Kind: Git, URL: s.URL, Ref: string(name), Revision: hash.String(), Dir: s.Dir})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Ref < out[j].Ref })
	return out, nil
}
