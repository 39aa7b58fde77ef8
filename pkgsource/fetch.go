package pkgsource

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// Fetch writes the content of s (its Dir, if set) into dir, an existing
// empty directory, and returns what it resolved. The content is written to
// a staging directory beside dir and moved in only when the whole fetch
// succeeded, so dir holds nothing of a failed fetch. Errors name the source
// and wrap ErrLimit, ErrDenied or ErrInvalid when a bound or a rule of
// Limits refused it.
func Fetch(ctx context.Context, s Spec, dir string, l Limits) (Resolved, error) {
	l = l.withDefaults()
	if err := checkEmpty(dir); err != nil {
		return Resolved{}, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(dir), ".pkgsource-")
	if err != nil {
		return Resolved{}, err
	}
	defer os.RemoveAll(staging)
	r, err := fetchInto(ctx, s, staging, l)
	if err != nil {
		return Resolved{}, err
	}
	if err := moveAll(staging, dir); err != nil {
		return Resolved{}, err
	}
	return r, nil
}

func fetchInto(ctx context.Context, s Spec, staging string, l Limits) (Resolved, error) {
	src := s.name()
	ctx, cancel := withTimeout(ctx, src, l)
	defer cancel()
	t, err := newTree(src, staging, l)
	if err != nil {
		return Resolved{}, err
	}
	defer t.close()
	var r Resolved
	switch s.Kind {
	case Git:
		r, err = fetchGit(ctx, s, t)
	case HTTP:
		r, err = fetchHTTP(ctx, s, t)
	case Image:
		r, err = fetchImage(ctx, s, t)
	default:
		return Resolved{}, fmt.Errorf("source %s: kind %q is not git, http or image: %w", redact(s.URL), s.Kind, ErrInvalid)
	}
	if err != nil {
		return Resolved{}, ctxErr(ctx, err)
	}
	return r, nil
}

// Resolve checks s cheaply (git ls-remote, a conditional GET with prev's
// ETag or Last-Modified, a manifest HEAD) and returns what it resolves to
// now: its Revision equals prev.Revision when nothing changed.
func Resolve(ctx context.Context, s Spec, prev Resolved, l Limits) (Resolved, error) {
	l = l.withDefaults()
	src := s.name()
	ctx, cancel := withTimeout(ctx, src, l)
	defer cancel()
	var r Resolved
	var err error
	switch s.Kind {
	case Git:
		r, err = resolveGit(ctx, s, l)
	case HTTP:
		r, err = resolveHTTP(ctx, s, prev, l)
	case Image:
		r, err = resolveImage(ctx, s, l)
	default:
		return Resolved{}, fmt.Errorf("source %s: kind %q is not git, http or image: %w", redact(s.URL), s.Kind, ErrInvalid)
	}
	if err != nil {
		return Resolved{}, ctxErr(ctx, err)
	}
	return r, nil
}

// Compose fetches each spec into dir/<Destination> (dir an existing empty
// directory) and returns what each resolved, in order. Two specs writing
// the same file, or a file where the other writes a directory, is an error
// naming both. Limits apply to each spec.
func Compose(ctx context.Context, specs []Spec, dir string, l Limits) ([]Resolved, error) {
	l = l.withDefaults()
	if err := checkEmpty(dir); err != nil {
		return nil, err
	}
	staging, err := os.MkdirTemp(filepath.Dir(dir), ".pkgsource-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(staging)
	files, dirs := map[string]int{}, map[string]int{}
	var out []Resolved
	for i, s := range specs {
		dest, err := cleanDir(s.name(), "destination", s.Destination)
		if err != nil {
			return nil, err
		}
		part := filepath.Join(staging, fmt.Sprintf("%d", i))
		if err := os.Mkdir(part, 0o755); err != nil {
			return nil, err
		}
		r, err := fetchInto(ctx, s, part, l)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
		err = filepath.WalkDir(part, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(part, p)
			name := path.Join(dest, filepath.ToSlash(rel))
			if j, ok := files[name]; ok {
				return fmt.Errorf("%s and %s both write %s: give them different destinations: %w",
					specs[j].name(), s.name(), name, ErrInvalid)
			}
			if j, ok := dirs[name]; ok && j != i {
				return fmt.Errorf("%s writes the directory %s and %s a file of that name: give them different destinations: %w",
					specs[j].name(), name, s.name(), ErrInvalid)
			}
			files[name] = i
			for parent := path.Dir(name); parent != "."; parent = path.Dir(parent) {
				if j, ok := files[parent]; ok && j != i {
					return fmt.Errorf("%s writes the file %s and %s a directory of that name: give them different destinations: %w",
						specs[j].name(), parent, s.name(), ErrInvalid)
				}
				if _, ok := dirs[parent]; !ok {
					dirs[parent] = i
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	merged := filepath.Join(staging, "merged")
	if err := os.Mkdir(merged, 0o755); err != nil {
		return nil, err
	}
	for i, s := range specs {
		dest, _ := cleanDir(s.name(), "destination", s.Destination)
		target := filepath.Join(merged, filepath.FromSlash(dest))
		if err := os.MkdirAll(target, 0o755); err != nil {
			return nil, err
		}
		if err := mergeInto(filepath.Join(staging, fmt.Sprintf("%d", i)), target); err != nil {
			return nil, err
		}
	}
	if err := moveAll(merged, dir); err != nil {
		return nil, err
	}
	return out, nil
}

// mergeInto moves the entries of from into to, descending into
// directories both have.
func mergeInto(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		src, dst := filepath.Join(from, e.Name()), filepath.Join(to, e.Name())
		if fi, err := os.Lstat(dst); err == nil && fi.IsDir() && e.IsDir() {
			if err := mergeInto(src, dst); err != nil {
				return err
			}
			continue
		}
		if err := os.Rename(src, dst); err != nil {
			return err
		}
	}
	return nil
}

func checkEmpty(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("fetch into %s: %w", dir, err)
	}
	if len(entries) > 0 {
		return fmt.Errorf("fetch into %s: the directory is not empty", dir)
	}
	return nil
}

// moveAll moves the entries of staging into dir; if one fails, those
// moved are taken out again.
func moveAll(staging, dir string) error {
	entries, err := os.ReadDir(staging)
	if err != nil {
		return err
	}
	var moved []string
	for _, e := range entries {
		dst := filepath.Join(dir, e.Name())
		if err := os.Rename(filepath.Join(staging, e.Name()), dst); err != nil {
			for _, m := range moved {
				os.RemoveAll(m)
			}
			return fmt.Errorf("fetch into %s: %w", dir, err)
		}
		moved = append(moved, dst)
	}
	return nil
}
