package pkgformat

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"strings"
	"testing"
)

// tarEntry is one entry of a tarball built by a test.
type tarEntry struct {
	name string
	typ  byte // tar.TypeReg when zero
	body string
	link string
	mode int64
}

// reg is a regular file entry.
func reg(name, body string) tarEntry { return tarEntry{name: name, body: body} }

// makeTar builds an uncompressed tar of entries.
func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: e.mode, Size: int64(len(e.body)), Format: tar.FormatPAX}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag == tar.TypeXGlobalHeader {
			hdr = &tar.Header{Name: e.name, Typeflag: e.typ, PAXRecords: map[string]string{"comment": "git archive writes these"}}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// gz compresses data with gzip.
func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tgz builds a gzipped tar of entries.
func tgz(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	return gz(t, makeTar(t, entries...))
}

// file is a package file for New.
func file(p, data string) File { return File{Path: p, Mode: 0o644, Data: []byte(data)} }

const goodOperator = "apiVersion: kudo.dev/v1beta1\nname: demo\noperatorVersion: 0.1.0\n"

const aliasBomb = `a: &a ["x","x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h,*h]
name: demo
operatorVersion: 0.1.0
`

const csvNoVersion = `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v0.1.0
spec:
  displayName: Demo
`

const goodAnnotations = `annotations:
  operators.operatorframework.io.bundle.package.v1: demo
  operators.operatorframework.io.bundle.channels.v1: alpha
`

const goodCSV = `apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: demo.v0.1.0
spec:
  version: 0.1.0
`

func TestReadArchiveRefuses(t *testing.T) {
	zeros := strings.Repeat("\x00", 600<<10)
	valid := makeTar(t, reg("operator.yaml", goodOperator))
	small := Limits{MaxFileSize: 1 << 20, MaxTotalSize: 1 << 20, MaxFiles: 5}
	tests := []struct {
		name    string
		archive []byte
		limits  Limits
		want    error
		file    string // the file the error must name
		rule    string // and the rule
	}{
		{"path traversal", tgz(t, reg("../x", "x")), Limits{}, ErrInvalid, "../x", "escapes the package root"},
		{"traversal inside path", tgz(t, reg("templates/../../x", "x")), Limits{}, ErrInvalid, "templates/../../x", "escapes the package root"},
		{"absolute path", tgz(t, reg("/etc/passwd", "x")), Limits{}, ErrInvalid, "/etc/passwd", "absolute"},
		{"backslash path", tgz(t, reg(`..\..\x`, "x")), Limits{}, ErrInvalid, `..\\..\\x`, "backslash"},
		{"unclean path", tgz(t, reg("a//b", "x")), Limits{}, ErrInvalid, "a//b", "not clean"},
		{"non-UTF-8 path", tgz(t, reg("a\xff.yaml", "x")), Limits{}, ErrInvalid, `a\xff.yaml`, "UTF-8"},
		{"over-long path", tgz(t, reg(strings.Repeat("a/", 600)+"x", "x")), Limits{}, ErrLimit, "a/a/a/", "longer than 1024 bytes"},
		{"symlink out", tgz(t, reg("a.yaml", "x"), tarEntry{name: "evil", typ: tar.TypeSymlink, link: "../../etc/passwd"}), Limits{}, ErrInvalid, "evil", "symlink points outside the package"},
		{"absolute symlink", tgz(t, tarEntry{name: "evil", typ: tar.TypeSymlink, link: "/etc/passwd"}), Limits{}, ErrInvalid, "evil", "symlink points outside the package"},
		{"hardlink out", tgz(t, tarEntry{name: "evil", typ: tar.TypeLink, link: "../outside"}), Limits{}, ErrInvalid, "evil", "hardlink points outside the package"},
		{"symlink to missing target", tgz(t, tarEntry{name: "dangling", typ: tar.TypeSymlink, link: "nothing.yaml"}), Limits{}, ErrInvalid, "dangling", "does not exist"},
		{"symlink to directory", tgz(t, reg("dir/a.yaml", "x"), tarEntry{name: "l", typ: tar.TypeSymlink, link: "dir"}), Limits{}, ErrInvalid, "l", "points to a directory"},
		{"symlink loop", tgz(t, tarEntry{name: "a", typ: tar.TypeSymlink, link: "b"}, tarEntry{name: "b", typ: tar.TypeSymlink, link: "a"}), Limits{}, ErrInvalid, "a", "levels of links"},
		{"character device", tgz(t, tarEntry{name: "dev/null", typ: tar.TypeChar}), Limits{}, ErrInvalid, "dev/null", "device"},
		{"block device", tgz(t, tarEntry{name: "sda", typ: tar.TypeBlock}), Limits{}, ErrInvalid, "sda", "device"},
		{"FIFO", tgz(t, tarEntry{name: "pipe", typ: tar.TypeFifo}), Limits{}, ErrInvalid, "pipe", "FIFO"},
		{"duplicate entry", tgz(t, reg("a.yaml", "x"), reg("./a.yaml", "y")), Limits{}, ErrInvalid, "a.yaml", "duplicate"},
		{"file and folder", tgz(t, reg("a", "x"), reg("a/b", "y")), Limits{}, ErrInvalid, "a", "both a file and a directory"},
		{"oversize file", tgz(t, reg("big", strings.Repeat("x", 2048))), Limits{MaxFileSize: 1024}, ErrLimit, "big", "larger than 1024 bytes"},
		{"too many files", tgz(t, reg("1", ""), reg("2", ""), reg("3", ""), reg("4", ""), reg("5", ""), reg("6", "")), small, ErrLimit, "6", "more than 5 files"},
		{"total size bomb", tgz(t, reg("a", zeros), reg("b", zeros)), small, ErrLimit, "b", "files together are larger"},
		{"links multiply size", tgz(t, reg("a", zeros), tarEntry{name: "b", typ: tar.TypeSymlink, link: "a"}), small, ErrLimit, "b", "files together are larger"},
		{"gzip bomb after the tar", gz(t, append(slicesClone(valid), make([]byte, 4<<20)...)), small, ErrLimit, "archive", "decompressed archive is larger"},
		{"compressed size", tgz(t, reg("a", "x")), Limits{MaxArchiveSize: 20}, ErrLimit, "archive", "compressed archive is larger than 20 bytes"},
		{"not gzip", []byte("hello, world"), Limits{}, ErrInvalid, "archive", "gzip"},
		{"gzip checksum", badChecksum(tgz(t, reg("a", strings.Repeat("abc", 1000)))), Limits{}, ErrInvalid, "archive", "corrupt or truncated gzip stream: gzip: invalid checksum"},
		{"corrupt deflate data", corrupt(tgz(t, reg("a", strings.Repeat("abc", 1000)))), Limits{}, ErrInvalid, "archive", "corrupt or truncated"},
		{"truncated gzip", truncate(tgz(t, reg("a", strings.Repeat("abc", 1000)))), Limits{}, ErrInvalid, "archive", "gzip"},
		{"truncated tar", gz(t, valid[:530]), Limits{}, ErrInvalid, "archive", "corrupt or truncated tar stream: unexpected EOF"},
		{"data after the tar", gz(t, append(slicesClone(valid), []byte("trailing garbage")...)), Limits{}, ErrInvalid, "archive", "after the end of the tar archive"},
		{"data after the gzip stream", append(gz(t, valid), "garbage"...), Limits{}, ErrInvalid, "archive", "after the end of the gzip stream"},
		{"second gzip member", append(gz(t, valid), gz(t, valid)...), Limits{}, ErrInvalid, "archive", "after the end of the gzip stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files, err := ReadArchive(bytes.NewReader(tt.archive), tt.limits)
			assertError(t, err, tt.want, tt.file, tt.rule)
			if files != nil {
				t.Errorf("files returned with the error")
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	tests := []struct {
		name  string
		files []File
		opts  Options
		want  error
		file  string
		rule  string
	}{
		{"NUL in path", []File{file("a\x00b", "")}, Options{}, ErrInvalid, `a\x00b`, "NUL"},
		{"YAML alias bomb", []File{file("operator.yaml", aliasBomb)}, Options{}, ErrInvalid, "operator.yaml", "alias bomb"},
		{"self-referencing alias", []File{file("operator.yaml", "a: &a [*a]\nname: demo\n")}, Options{}, ErrInvalid, "operator.yaml", "refers to a node that contains it"},
		{"YAML nested too deep", []File{file("operator.yaml", "a: "+deep+"\n")}, Options{}, ErrInvalid, "operator.yaml", "nested deeper than"},
		{"malformed YAML", []File{file("operator.yaml", "name: demo\noperatorVersion: 0.1.0\n  url: x\n")}, Options{}, ErrInvalid, "operator.yaml", "malformed YAML: line 3"},
		{"YAML of the wrong shape", []File{file("operator.yaml", "name: demo\noperatorVersion:\n  a: b\n")}, Options{}, ErrInvalid, "operator.yaml", "line 3"},
		{"two documents", []File{file("operator.yaml", goodOperator+"---\n"+goodOperator)}, Options{}, ErrInvalid, "operator.yaml", "expected one YAML document"},
		{"KUDO without operatorVersion", []File{file("operator.yaml", "name: demo\nappVersion: 1.0.0\n")}, Options{}, ErrInvalid, "operator.yaml", "operatorVersion"},
		{"KUDO without name", []File{file("operator.yaml", "operatorVersion: 0.1.0\n")}, Options{}, ErrInvalid, "operator.yaml", "name"},
		{"uppercase name", []File{file("operator.yaml", "name: Demo\noperatorVersion: 0.1.0\n")}, Options{}, ErrInvalid, "operator.yaml", "lowercase"},
		{"version not a tag", []File{file("operator.yaml", "name: demo\noperatorVersion: 0.1.0 beta\n")}, Options{}, ErrInvalid, "operator.yaml", "OCI tag"},
		{"name differs from expected", []File{file("operator.yaml", goodOperator)}, Options{Name: "other"}, ErrInvalid, "operator.yaml", `does not match the expected name "other"`},
		{"version differs from expected", []File{file("operator.yaml", goodOperator)}, Options{Version: "9.9.9"}, ErrInvalid, "operator.yaml", `"0.1.0" does not match the expected version "9.9.9"`},
		{"Helm version not semver", []File{file("Chart.yaml", "name: demo\nversion: latest\n")}, Options{}, ErrInvalid, "Chart.yaml", "not a semantic version"},
		{"Helm without version", []File{file("Chart.yaml", "name: demo\n")}, Options{}, ErrInvalid, "Chart.yaml", "version"},
		{"CSV without spec.version", []File{file(bundleAnnotations, goodAnnotations), file("manifests/demo"+csvSuffix, csvNoVersion)}, Options{}, ErrInvalid, "manifests/demo" + csvSuffix, "spec.version"},
		{"bundle without package annotation", []File{file(bundleAnnotations, "annotations:\n  operators.operatorframework.io.bundle.channels.v1: alpha\n"), file("manifests/demo"+csvSuffix, goodCSV)}, Options{}, ErrInvalid, bundleAnnotations, annotationPackage},
		{"bundle without annotations", []File{file("manifests/demo"+csvSuffix, goodCSV)}, Options{}, ErrInvalid, bundleAnnotations, "missing"},
		{"bundle without CSV", []File{file(bundleAnnotations, goodAnnotations), file("manifests/crd.yaml", "kind: CustomResourceDefinition\n")}, Options{}, ErrInvalid, "manifests/", "no ClusterServiceVersion"},
		{"version folder without package name", []File{file("demo.v0.1.0"+csvSuffix, goodCSV)}, Options{}, ErrInvalid, "demo.v0.1.0" + csvSuffix, "does not name its package"},
		{"plain without version", []File{file("manifests/a.yaml", "kind: ConfigMap\n")}, Options{Name: "demo"}, ErrInvalid, "manifests/", "plain package: its name and version must be given"},
		{"plain with malformed YAML", []File{file("manifests/a.yaml", "kind: ConfigMap\ndata:\n  a: b\n\tc: d\n")}, Options{Name: "demo", Version: "1.0.0"}, ErrInvalid, "manifests/a.yaml", "malformed YAML: line 3: found a tab character"},
		{"ambiguous format", []File{file("operator.yaml", goodOperator), file("Chart.yaml", "name: demo\nversion: 1.0.0\n")}, Options{}, ErrInvalid, rootName, "ambiguous"},
		{"unknown format", []File{file("README.md", "# hi\n"), file("values.yaml", "a: b\n")}, Options{}, ErrInvalid, rootName, "no package format recognised: expected operator.yaml (KUDO), Chart.yaml (Helm)"},
		{"unknown format in one folder", []File{file("demo/README.md", "# hi\n")}, Options{}, ErrInvalid, rootName, "no package format recognised"},
		{"oversize YAML", []File{file("operator.yaml", goodOperator+"#"+strings.Repeat("x", 2000)+"\n")}, Options{Limits: Limits{MaxFileSize: 1024}}, ErrLimit, "operator.yaml", "larger than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.files, tt.opts)
			assertError(t, err, tt.want, tt.file, tt.rule)
			if p != nil {
				t.Errorf("package returned with the error")
			}
		})
	}
}

// assertError checks that err wraps want and names file and rule.
func assertError(t *testing.T, err, want error, file, rule string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %v naming %q and %q", want, file, rule)
	}
	if !errors.Is(err, want) {
		t.Errorf("error %q does not wrap %v", err, want)
	}
	if !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), rule) {
		t.Errorf("error %q does not name %q and %q", err, file, rule)
	}
}

// corrupt flips bits in the middle of the deflate data.
func corrupt(b []byte) []byte {
	b = slicesClone(b)
	for i := len(b) / 2; i < len(b)/2+8; i++ {
		b[i] ^= 0xa5
	}
	return b
}

// badChecksum breaks the CRC-32 in the gzip trailer.
func badChecksum(b []byte) []byte {
	b = slicesClone(b)
	b[len(b)-8] ^= 0xff
	return b
}

// truncate cuts the last third off b.
func truncate(b []byte) []byte { return slicesClone(b[:len(b)*2/3]) }

func slicesClone(b []byte) []byte { return append([]byte(nil), b...) }

// controlNames are file names holding a C0 or C1 control character or DEL,
// each with how the error quotes it and the character it names.
var controlNames = []struct {
	label, name, quoted, char string
}{
	{"NUL", "a\x00b.yaml", `"a\x00b.yaml"`, "NUL"},
	{"BEL", "a\ab.yaml", `"a\ab.yaml"`, "U+0007"},
	{"tab", "a\tb.yaml", `"a\tb.yaml"`, "U+0009"},
	{"newline", "a\nb.yaml", `"a\nb.yaml"`, "U+000A"},
	{"carriage return", "a\rb.yaml", `"a\rb.yaml"`, "U+000D"},
	{"ESC", "templates/\x1b[31mred.yaml", `"templates/\x1b[31mred.yaml"`, "U+001B"},
	{"unit separator", "a\x1fb.yaml", `"a\x1fb.yaml"`, "U+001F"},
	{"DEL", "a\x7fb.yaml", `"a\x7fb.yaml"`, "U+007F"},
	{"NEL (U+0085)", "a\u0085b.yaml", `"a\u0085b.yaml"`, "U+0085"},
	{"CSI (U+009B)", "a\u009b2Jb.yaml", `"a\u009b2Jb.yaml"`, "U+009B"},
	{"APC (U+009F)", "templates/a\u009f.yaml", `"templates/a\u009f.yaml"`, "U+009F"},
}

// TestControlCharactersInPaths: a path holding a control character is
// refused wherever a path is read or written, naming the path quoted and
// the rule.
func TestControlCharactersInPaths(t *testing.T) {
	for _, tc := range controlNames {
		rule := tc.char + " (C0, DEL and C1 control characters are not allowed)"
		if tc.char == "NUL" {
			rule = "path contains a NUL byte"
		}
		t.Run(tc.label, func(t *testing.T) {
			if tc.char != "NUL" { // a tar header cannot hold a NUL in a name
				files, err := ReadArchive(bytes.NewReader(tgz(t, reg("operator.yaml", goodOperator), reg(tc.name, "x"))), Limits{})
				assertError(t, err, ErrInvalid, tc.quoted+": ", rule)
				if files != nil {
					t.Error("ReadArchive returned files with the error")
				}
			}
			p, err := New([]File{file("operator.yaml", goodOperator), file(tc.name, "x")}, Options{})
			assertError(t, err, ErrInvalid, tc.quoted+": ", rule)
			if p != nil {
				t.Error("New returned a package with the error")
			}
			out := t.TempDir()
			err = WriteFiles(out, []File{file("a.yaml", "x"), file(tc.name, "x")})
			assertError(t, err, ErrInvalid, tc.quoted+": ", rule)
			if entries, _ := os.ReadDir(out); len(entries) != 0 {
				t.Errorf("WriteFiles wrote %d entries before refusing", len(entries))
			}
			if tc.char == "NUL" {
				return // no file system can hold this name
			}
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"operator.yaml": goodOperator, tc.name: "x"})
			files, err := ReadDir(dir, Limits{})
			assertError(t, err, ErrInvalid, tc.quoted+": ", rule)
			if files != nil {
				t.Error("ReadDir returned files with the error")
			}
		})
	}
}

// TestChannelNames refuses, with the channel and the rule, a bundle whose
// channels annotation or default channel breaks the channel grammar, and
// a package manifest whose channels or default channel do; a multi-line
// annotation is one bad channel, never split into odd ones.
func TestChannelNames(t *testing.T) {
	bundle := func(channels, def string) []File {
		ann := "annotations:\n  operators.operatorframework.io.bundle.package.v1: demo\n  operators.operatorframework.io.bundle.channels.v1: " + channels + "\n"
		if def != "" {
			ann += "  operators.operatorframework.io.bundle.channel.default.v1: " + def + "\n"
		}
		return []File{file(bundleAnnotations, ann), file("manifests/demo"+csvSuffix, goodCSV)}
	}
	for _, tc := range []struct {
		name, channels, def, rule string
	}{
		{"HTML", `"<b>stable</b>"`, "", `channel name "<b>stable</b>" must be letters, digits`},
		{"a multi-line annotation", "|\n    stable\n    fast", "", `channel name "stable\nfast"`},
		{"a YAML comment lookalike", `"x: y #"`, "", `channel name "x: y #"`},
		{"a space", `"two words"`, "", `"two words"`},
		{"a leading dash", `"-stable"`, "", `"-stable"`},
		{"too long", strings.Repeat("a", 254), "", "longer than 253 bytes"},
		{"a bad default channel", "stable", `"<i>"`, `annotation operators.operatorframework.io.bundle.channel.default.v1: channel name "<i>"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(bundle(tc.channels, tc.def), Options{})
			assertError(t, err, ErrInvalid, bundleAnnotations, tc.rule)
		})
	}
	for _, ok := range []string{"stable", "original_40", "2.x-stable", "maintenance-1.5", "Stable.V1", "alpha, 1.x"} {
		if _, err := New(bundle(ok, ""), Options{}); err != nil {
			t.Errorf("channels %q: %v", ok, err)
		}
	}

	for _, tc := range []struct {
		name, pkgFile, rule string
	}{
		{"a bad channel", "packageName: demo\nchannels:\n- name: \"a\\nb\"\n  currentCSV: demo.v0.1.0\n", `channels[0]: channel name "a\nb"`},
		{"a bad default channel", "packageName: demo\ndefaultChannel: \"<x>\"\nchannels:\n- name: alpha\n  currentCSV: demo.v0.1.0\n", `defaultChannel: channel name "<x>"`},
	} {
		t.Run("package manifest with "+tc.name, func(t *testing.T) {
			dir := t.TempDir()
			must(t, WriteFiles(dir, []File{file("demo.package.yaml", tc.pkgFile), file("0.1.0/demo.v0.1.0"+csvSuffix, goodCSV)}))
			_, err := LoadRepository(dir, Options{})
			assertError(t, err, ErrInvalid, "demo.package.yaml", tc.rule)
		})
	}
}
