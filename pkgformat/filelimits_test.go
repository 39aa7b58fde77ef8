package pkgformat

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestFileCountAndTotalSizeLimits reads packages of exactly MaxFiles files and
// MaxTotalSize bytes, which must be read whole, and of one file or one byte
// more, which must be refused with ErrLimit, through each way in: an archive,
// a directory and a list of files.
func TestFileCountAndTotalSizeLimits(t *testing.T) {
	const maxFiles, maxTotal = 4, 200
	limits := Limits{MaxFiles: maxFiles, MaxTotalSize: maxTotal}
	readers := []struct {
		name string
		read func(t *testing.T, files map[string]string) (int, error)
	}{
		{"archive", func(t *testing.T, files map[string]string) (int, error) {
			var entries []tarEntry
			for p, data := range files {
				entries = append(entries, reg(p, data))
			}
			got, err := ReadArchive(bytes.NewReader(tgz(t, entries...)), limits)
			return len(got), err
		}},
		{"directory", func(t *testing.T, files map[string]string) (int, error) {
			dir := t.TempDir()
			writeTree(t, dir, files)
			got, err := ReadDir(dir, limits)
			return len(got), err
		}},
		{"files", func(t *testing.T, files map[string]string) (int, error) {
			var list []File
			for p, data := range files {
				list = append(list, file(p, data))
			}
			p, err := New(list, Options{Limits: limits})
			if err != nil {
				return 0, err
			}
			return len(p.Files), nil
		}},
	}
	cases := []struct {
		name  string
		files int
		total int
		rule  string // the error's rule; "" when the package is within the limits
	}{
		{"exactly MaxFiles", maxFiles, len(goodOperator), ""},
		{"one file over MaxFiles", maxFiles + 1, len(goodOperator), fmt.Sprintf("more than %d files", maxFiles)},
		{"exactly MaxTotalSize", 2, maxTotal, ""},
		{"one byte over MaxTotalSize", 2, maxTotal + 1, fmt.Sprintf("files together are larger than %d bytes", maxTotal)},
	}
	for _, r := range readers {
		for _, c := range cases {
			t.Run(r.name+"/"+c.name, func(t *testing.T) {
				n, err := r.read(t, limitedPackage(c.files, c.total))
				if c.rule == "" {
					if err != nil || n != c.files {
						t.Fatalf("read %d files, %v; want %d files", n, err, c.files)
					}
					return
				}
				if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), c.rule) {
					t.Fatalf("read %d files, %v; want ErrLimit saying %q", n, err, c.rule)
				}
			})
		}
	}
}

// limitedPackage is a KUDO package of n files (operator.yaml and fillers)
// holding total bytes, the extra bytes in the last filler.
func limitedPackage(n, total int) map[string]string {
	files := map[string]string{"operator.yaml": goodOperator}
	for i := 1; i < n; i++ {
		files[fmt.Sprintf("templates/filler-%d.txt", i)] = ""
	}
	files[fmt.Sprintf("templates/filler-%d.txt", n-1)] = strings.Repeat("x", total-len(goodOperator))
	return files
}
