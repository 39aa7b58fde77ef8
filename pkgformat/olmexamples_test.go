package pkgformat

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCSVExamples(t *testing.T) {
	file := filepath.Join("..", "..", "shared", "fixtures", "olm-community", "etcd", "0.9.4", "etcdoperator.v0.9.4.clusterserviceversion.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := CSVExamples(context.Background(), file, data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ex["etcd.database.coreos.com/EtcdCluster"]; len(got) != 1 || !strings.Contains(got[0], "\n  \"kind\": \"EtcdCluster\"") {
		t.Errorf("EtcdCluster examples %q", got)
	}
	if len(ex) != 3 {
		t.Errorf("examples of %d kinds, want 3 (cluster, backup, restore): %v", len(ex), ex)
	}

	bomb := "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\ng: [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\nmetadata: {annotations: {alm-examples: '[]'}}\n"
	for _, tc := range []struct {
		name, csv, says string
	}{
		{"not YAML", "metadata: [", "x.clusterserviceversion.yaml: malformed YAML"},
		{"two documents", "metadata: {}\n---\nmetadata: {}\n", "expected one YAML document"},
		{"no annotation", "metadata: {name: x}\n", "annotation alm-examples"},
		{"not a JSON array", "metadata: {annotations: {alm-examples: '{\"kind\": \"A\"}'}}\n", "annotation alm-examples"},
		{"an alias bomb", bomb, "alias bomb"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex, err := CSVExamples(context.Background(), "x.clusterserviceversion.yaml", []byte(tc.csv), Limits{})
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("CSVExamples = %v, %v; want ErrInvalid saying %q", ex, err, tc.says)
			}
		})
	}
	ex, err = CSVExamples(context.Background(), "x.clusterserviceversion.yaml", []byte("metadata: {annotations: {alm-examples: '[1, {\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\"}]'}}\n"), Limits{})
	if err != nil || len(ex) != 1 || len(ex["/ConfigMap"]) != 1 {
		t.Errorf("a number among the examples: %v, %v; want the ConfigMap alone, of the core group", ex, err)
	}
}
