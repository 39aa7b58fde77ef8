package pkgformat

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// yamlShape is a hostile package: plain manifests whose YAML is cheap to
// send and, unbounded, costly to parse.
type yamlShape struct {
	name   string
	files  func() []File
	limits Limits
	// want is the error the package must be refused with, and reason
	// names the limit.
	want   error
	reason string
}

// plainPackage is a plain package of the given manifests files.
func plainPackage(manifests ...File) []File {
	return append([]File{file("README.md", "hostile\n")}, manifests...)
}

// repeatTo repeats unit until it fills size bytes.
func repeatTo(unit string, size int) string { return strings.Repeat(unit, size/len(unit)) }

// wideMapping is one flow mapping of distinct keys filling size bytes.
func wideMapping(size int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "k%d: 1, ", i)
	}
	b.WriteString("}\n")
	return b.String()
}

// anchoredFile holds an anchored mapping of keys nodes and refs merges of it.
func anchoredFile(keys, refs int) string {
	var b strings.Builder
	b.WriteString("base: &b {")
	for i := range keys {
		fmt.Fprintf(&b, "k%d: %d, ", i, i)
	}
	b.WriteString("}\nitems: [")
	for range refs {
		b.WriteString("{<<: *b}, ")
	}
	b.WriteString("]\n")
	return b.String()
}

// smallFiles is n files of a mapping of keys keys (at most 1000), each
// file 8*keys bytes and 2*keys+2 nodes.
func smallFiles(n, keys int) []File {
	var b strings.Builder
	for i := range keys {
		fmt.Fprintf(&b, "k%03d: 1\n", i)
	}
	body := b.String()
	files := make([]File, n)
	for i := range files {
		files[i] = file(fmt.Sprintf("manifests/m%05d.yaml", i), body)
	}
	return files
}

const sixteenMiB = 16 << 20

// hostileYAML are the shapes every YAML limit must stop.
var hostileYAML = []yamlShape{
	{"many documents", func() []File {
		return plainPackage(file("manifests/docs.yaml", repeatTo("---\na: 1\n", sixteenMiB)))
	}, Limits{}, ErrLimit, "more than 10000 YAML documents in one file (MaxYAMLDocuments)"},
	{"deep flow nesting", func() []File {
		return plainPackage(file("manifests/deep.yaml", repeatTo("[", sixteenMiB)))
	}, Limits{}, ErrInvalid, "exceeded max depth of 10000"},
	{"deep nesting within yaml.v3's depth", func() []File {
		return plainPackage(file("manifests/deep.yaml", strings.Repeat("[", 9000)+strings.Repeat("]", 9000)+"\n"))
	}, Limits{}, ErrInvalid, "YAML is nested deeper than 128 levels"},
	{"nested flow sequences", func() []File {
		return plainPackage(file("manifests/nested.yaml", "["+repeatTo("[[[[1]]]],", sixteenMiB)+"]\n"))
	}, Limits{}, ErrLimit, "a YAML document has more than 250000 nodes (MaxYAMLDocumentNodes)"},
	{"wide mapping", func() []File {
		return plainPackage(file("manifests/wide.yaml", wideMapping(sixteenMiB-64)))
	}, Limits{}, ErrLimit, "a YAML document has more than 250000 nodes (MaxYAMLDocumentNodes)"},
	{"wide block mapping", func() []File {
		return plainPackage(file("manifests/block.yaml", repeatTo("k: 1\n", sixteenMiB)))
	}, Limits{}, ErrLimit, "a YAML document has more than 250000 nodes (MaxYAMLDocumentNodes)"},
	{"long scalars", func() []File {
		scalar := "a: " + strings.Repeat("x", 4<<20) + "\n"
		return plainPackage(file("manifests/a.yaml", scalar), file("manifests/b.yaml", scalar), file("manifests/c.yaml", scalar))
	}, Limits{MaxYAMLSize: 10 << 20}, ErrLimit, "the package's YAML is larger than 10485760 bytes (MaxYAMLSize)"},
	{"anchors and merges", func() []File {
		doc := anchoredFile(500, 600)
		return plainPackage(file("manifests/a.yaml", doc), file("manifests/b.yaml", doc))
	}, Limits{}, ErrLimit, "the package's YAML has more than 1000000 nodes (MaxYAMLNodes)"},
	{"wide mapping within the node limits", func() []File {
		return plainPackage(smallFiles(1, 1000)[0], file("manifests/wide.yaml", wideMapping(80000)))
	}, Limits{}, ErrLimit, "mapping has more than 4096 keys"},
	{"duplicate keys", func() []File {
		return plainPackage(file("manifests/dup.yaml", repeatTo("k: 1\n", 20000)))
	}, Limits{}, ErrInvalid, `line 2: mapping key "k" already defined at line 1`},
	{"many small files", func() []File {
		return plainPackage(smallFiles(5000, 100)...)
	}, Limits{}, ErrLimit, "the package's YAML has more than 1000000 nodes (MaxYAMLNodes)"},
}

func TestHostileYAMLIsRefusedByALimit(t *testing.T) {
	for _, shape := range hostileYAML {
		t.Run(shape.name, func(t *testing.T) {
			start := time.Now()
			_, err := New(shape.files(), Options{Name: "hostile", Version: "1.0.0", Limits: shape.limits})
			if !errors.Is(err, shape.want) {
				t.Fatalf("New = %v, want %v", err, shape.want)
			}
			if !strings.Contains(err.Error(), shape.reason) {
				t.Fatalf("New = %v, want the reason %q", err, shape.reason)
			}
			if !strings.HasPrefix(err.Error(), "manifests/") {
				t.Fatalf("New = %v, want the file named first", err)
			}
			t.Logf("%s in %s", err, time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestYAMLLimitsAllowWhatTheyBound(t *testing.T) {
	// Just under each limit, the package reads.
	for _, tc := range []struct {
		name   string
		files  []File
		limits Limits
	}{
		{"documents", plainPackage(file("manifests/docs.yaml", strings.Repeat("---\nkind: A\n", 100))), Limits{MaxYAMLDocuments: 100}},
		{"nodes", plainPackage(smallFiles(10, 100)...), Limits{MaxYAMLNodes: 10*202 + 500}}, // the estimate of the last file fits
		{"size", plainPackage(smallFiles(10, 100)...), Limits{MaxYAMLSize: 10 * 800}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.files, Options{Name: "p", Version: "1.0.0", Limits: tc.limits}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestYAMLReadingStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	files := plainPackage(file("manifests/a.yaml", "kind: A\n"))
	_, err := New(files, Options{Name: "p", Version: "1.0.0", Context: ctx})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "manifests/a.yaml") {
		t.Fatalf("New = %v, want context.Canceled naming the file", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	if _, err := Load("testdata/does-not-matter", Options{Context: ctx}); err == nil {
		t.Fatal("Load after the deadline succeeded")
	}
}

// TestHostileKUDOTemplatesAreRefusedByALimit: KUDO templates that do not
// read as YAML are passed over, but one that hits a limit of the package
// refuses it, as any other file does.
func TestHostileKUDOTemplatesAreRefusedByALimit(t *testing.T) {
	operator := file("operator.yaml", "apiVersion: kudo.dev/v1beta1\nname: hostile\noperatorVersion: 1.0.0\n")
	broken := file("templates/broken.yaml", "a: [\n")
	if _, err := New([]File{operator, broken}, Options{}); err != nil {
		t.Fatalf("a template that is not YAML: %v, want it passed over", err)
	}
	docs := file("templates/docs.yaml", repeatTo("---\na: 1\n", sixteenMiB))
	_, err := New([]File{operator, broken, docs}, Options{})
	const reason = "templates/docs.yaml: more than 10000 YAML documents in one file (MaxYAMLDocuments)"
	if !errors.Is(err, ErrLimit) || !strings.Contains(err.Error(), reason) {
		t.Fatalf("New = %v, want ErrLimit with %q", err, reason)
	}
}
