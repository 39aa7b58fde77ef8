package deploy

import (
	"os"
	"path/filepath"
	"testing"
)

// TestManifests checks the plain manifests for a single node: a StatefulSet
// running the chart's image with filesystem storage and the SQLite catalog
// on a volume claim template, a public URL and upload limits set, and the
// chart's default NetworkPolicy.
func TestManifests(t *testing.T) {
	files, err := filepath.Glob("manifests/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests/*.yaml (%v)", err)
	}
	var objs []object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, parseObjects(t, b)...)
	}
	d := checkDeployment(t, objs, chartImage(t), nil)
	if len(ofKind(objs, "StatefulSet")) != 1 {
		t.Error("the workload is not a StatefulSet")
	}
	if n := d.replicas(); n != 1 {
		t.Errorf("replicas %d, want 1", n)
	}
	if d.config.Storage.Driver != "filesystem" || d.config.Catalog.Postgres() {
		t.Errorf("storage %q, catalog %q: want filesystem and SQLite", d.config.Storage.Driver, d.config.Catalog.Database)
	}
	name := ""
	for _, c := range d.workload.Spec.VolumeClaimTemplates {
		if v := d.mounts[d.config.Data]; v.PersistentVolumeClaim != nil && v.Name == c.Metadata.Name {
			name = c.Metadata.Name
		}
	}
	if name == "" {
		t.Errorf("the data directory %s is not on a volume claim template", d.config.Data)
	}
	if from, egress := checkNetworkPolicy(t, objs, d.workload); from != 0 || len(egress) != 0 {
		t.Errorf("NetworkPolicy: ingress from %d peers, egress ports %v besides DNS; want anywhere, and DNS only", from, egress)
	}
	if d.config.Catalog.PublicURL == "" {
		t.Error("catalog.publicURL is not set: OLM catalog images would name localhost:5000")
	}
	if u := d.config.Registry.Uploads; u.MaxSize <= 0 {
		t.Errorf("registry.uploads.maxSize %d, want a limit below the volume's size", u.MaxSize)
	}
}
