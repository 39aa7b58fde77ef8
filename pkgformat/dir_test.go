package pkgformat

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

// writeTree creates the files of a map (path -> content) under dir.
func writeTree(t *testing.T, dir string, tree map[string]string) {
	t.Helper()
	for p, data := range tree {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadDir(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"operator.yaml":        goodOperator,
		"templates/a.yaml":     "kind: ConfigMap\n",
		".git/config":          "[core]\n",
		"sub/.svn/entries":     "x",
		".hidden/kept.txt":     "kept",
		"templates/run.sh":     "#!/bin/sh\n",
		"templates/.gitignore": "*.tmp\n",
	})
	if err := os.Chmod(filepath.Join(dir, "templates/run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a.yaml", filepath.Join(dir, "templates/b.yaml")); err != nil {
		t.Fatal(err)
	}
	files, err := ReadDir(dir, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: ".hidden/kept.txt", Mode: 0o644, Data: []byte("kept")},
		{Path: "operator.yaml", Mode: 0o644, Data: []byte(goodOperator)},
		{Path: "templates/.gitignore", Mode: 0o644, Data: []byte("*.tmp\n")},
		{Path: "templates/a.yaml", Mode: 0o644, Data: []byte("kind: ConfigMap\n")},
		{Path: "templates/b.yaml", Mode: 0o644, Data: []byte("kind: ConfigMap\n")},
		{Path: "templates/run.sh", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("got %v\nwant %v", files, want)
	}
	if _, err := ReadDir(filepath.Join(dir, "missing"), Limits{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: %v", err)
	}
}

func TestReadDirRefuses(t *testing.T) {
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "s3cr3t"})
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  error
		file  string
		rule  string
	}{
		{"symlink out", func(t *testing.T, dir string) {
			must(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "evil")))
		}, ErrInvalid, "evil", "symlink points outside the package"},
		{"relative symlink out", func(t *testing.T, dir string) {
			must(t, os.Symlink("../../../../../../etc/passwd", filepath.Join(dir, "templates", "evil")))
		}, ErrInvalid, "templates/evil", "symlink points outside the package"},
		{"symlink to directory", func(t *testing.T, dir string) {
			must(t, os.Symlink("templates", filepath.Join(dir, "link")))
		}, ErrInvalid, "link", "points to a directory"},
		{"dangling symlink", func(t *testing.T, dir string) {
			must(t, os.Symlink("nothing", filepath.Join(dir, "dangling")))
		}, ErrInvalid, "dangling", "does not exist"},
		{"FIFO", func(t *testing.T, dir string) {
			must(t, syscall.Mkfifo(filepath.Join(dir, "pipe"), 0o644))
		}, ErrInvalid, "pipe", "FIFOs are not allowed"},
		{"non-UTF-8 name", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "bad\xff"), nil, 0o644))
		}, ErrInvalid, `bad\xff`, "UTF-8"},
		{"backslash in name", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, `a\b`), nil, 0o644))
		}, ErrInvalid, `a\\b`, "backslash"},
		{"oversize file", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, "big"), make([]byte, 4096), 0o644))
		}, ErrLimit, "big", "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"operator.yaml": goodOperator, "templates/a.yaml": "a: b\n"})
			tt.setup(t, dir)
			files, err := ReadDir(dir, Limits{MaxFileSize: 1024})
			assertError(t, err, tt.want, tt.file, tt.rule)
			if files != nil {
				t.Error("files returned with the error")
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	files := []File{
		{Path: "operator.yaml", Mode: 0o644, Data: []byte(goodOperator)},
		{Path: "templates/deep/a.yaml", Mode: 0o644, Data: []byte("a: b\n")},
		{Path: "bin/run.sh", Mode: 0o755, Data: []byte("#!/bin/sh\n")},
	}
	must(t, WriteFiles(dir, files))
	must(t, os.WriteFile(filepath.Join(dir, "operator.yaml"), []byte("old and longer content\n"), 0o600))
	must(t, WriteFiles(dir, files))
	got, err := ReadDir(dir, Limits{})
	must(t, err)
	sortFiles(files)
	if !reflect.DeepEqual(got, files) {
		t.Errorf("read back %v\nwant %v", got, files)
	}
}

func TestWriteFilesRefuses(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir, outside string)
		files []File
		file  string
		rule  string
	}{
		{"escape through an existing symlinked folder", func(t *testing.T, dir, outside string) {
			must(t, os.Symlink(outside, filepath.Join(dir, "templates")))
		}, []File{file("templates/x.yaml", "pwned")}, "templates/x.yaml", "existing symlink templates"},
		{"escape through an existing symlinked file", func(t *testing.T, dir, outside string) {
			must(t, os.Symlink(filepath.Join(outside, "x.yaml"), filepath.Join(dir, "x.yaml")))
		}, []File{file("x.yaml", "pwned")}, "x.yaml", "existing symlink x.yaml"},
		{"path traversal", nil, []File{file("../x.yaml", "pwned")}, "../x.yaml", "escapes the package root"},
		{"absolute path", nil, []File{file("/x.yaml", "pwned")}, "/x.yaml", "absolute"},
		{"duplicate path", nil, []File{file("a", "1"), file("a", "2")}, "a", "duplicate"},
		{"a folder in the way", func(t *testing.T, dir, outside string) {
			must(t, os.MkdirAll(filepath.Join(dir, "x.yaml"), 0o755))
		}, []File{file("x.yaml", "x")}, "x.yaml", "not a regular file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			dir, outside := filepath.Join(base, "target"), filepath.Join(base, "outside")
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.MkdirAll(outside, 0o755))
			if tt.setup != nil {
				tt.setup(t, dir, outside)
			}
			err := WriteFiles(dir, tt.files)
			assertError(t, err, ErrInvalid, tt.file, tt.rule)
			for _, p := range []string{filepath.Join(outside, "x.yaml"), filepath.Join(base, "x.yaml")} {
				if _, err := os.Lstat(p); err == nil {
					t.Errorf("%s was written", p)
				}
			}
		})
	}
}
