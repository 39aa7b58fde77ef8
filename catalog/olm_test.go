package catalog_test

import (
	"strings"
	"testing"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/pkgformat"
)

// TestOLMBundleOpmRefusesIsInvalid: a version whose bundle opm would refuse
// (strimzi-kafka-operator 0.20.0 lists docker.io/strimzi/operator@@sha256:…
// among its images) is recorded invalid, with opm's rule as its reason, and
// is not among the versions the namespace's OLM catalog is rendered from;
// the same package's valid version is.
func TestOLMBundleOpmRefusesIsInvalid(t *testing.T) {
	e := newEnv(t, envOptions{})
	good := load(t, "olm-community/cockroachdb/5.0.4")
	e.pushPackage("olm", good)

	files := make([]pkgformat.File, len(good.Files))
	for i, f := range good.Files {
		files[i] = f
		if strings.HasSuffix(f.Path, ".clusterserviceversion.yaml") {
			s := strings.ReplaceAll(string(f.Data), "5.0.4", "5.0.5")
			s = strings.Replace(s, "image: quay.io/helmoperators/cockroachdb:v5.0.5", "image: docker.io/strimzi/operator@@sha256:"+strings.Repeat("a", 64), 1)
			files[i].Data = []byte(s)
		}
	}
	bad, err := pkgformat.New(files, pkgformat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e.pushPackage("olm", bad)

	var en = e.entry("olm", "cockroachdb", "5.0.5")
	e.waitFor("5.0.5 read", func() bool { en = e.entry("olm", "cockroachdb", "5.0.5"); return en != nil })
	if en.Status != apiv1.StatusInvalid || !strings.Contains(en.Reason, "olm bundle cockroachdb 5.0.5 is not valid for opm, so the namespace's catalog leaves it out") ||
		!strings.Contains(en.Reason, `invalid image pull spec "docker.io/strimzi/operator@@sha256:`) {
		t.Errorf("5.0.5 is %s (%s), want invalid naming the image pull spec opm refuses", en.Status, en.Reason)
	}
	e.waitFor("5.0.4 indexed", func() bool { g := e.entry("olm", "cockroachdb", "5.0.4"); return g != nil && g.OLM != nil })
	versions, err := e.cat.OLMVersions(e.ctx, "olm", "cockroachdb")
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1 || versions[0].Version != "5.0.4" {
		t.Errorf("the catalog is rendered from %+v, want 5.0.4 alone", versions)
	}
}
