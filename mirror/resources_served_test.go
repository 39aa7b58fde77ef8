package mirror

// Tests of the cluster resources against real servers: a registry holding
// the images at their mirrors, and berth serving a namespace's catalog.

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/distribution/reference"
	"github.com/opencontainers/go-digest"
	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/client"
	"github.com/berth-registry/berth/client/registrytest"
	"github.com/berth-registry/berth/config"
	berthnode "github.com/berth-registry/berth/node"
	"github.com/berth-registry/berth/pkgformat"
)

// TestClusterResourcesReachImages pushes an image to a real registry at
// each mirror location, and checks that a digest pull of each source image,
// mapped as the IDMS, the registries.conf drop-in and containerd's
// hosts.toml each map it, finds that image there.
func TestClusterResourcesReachImages(t *testing.T) {
	host := registrytest.New(t, nil)
	in := resourcesInput(host)
	c := invClient(t)
	p := &invPusher{t: t, c: c, host: host, want: map[string]map[digest.Digest]bool{}}
	images := map[string]digest.Digest{} // source repository → digest pushed at its mirror
	for _, src := range []string{"quay.io/org/operator", "quay.io/org/operand", "docker.io/library/nginx", "ghcr.io/team/tool", "ghcr.io/team/sub/other"} {
		loc, ok := catalog.NewMirrors(in.Mirrors).Location(catalog.ImageRef{Repository: src})
		m := loc.Repository
		if !ok {
			t.Fatalf("no mirror for %s", src)
		}
		repo := strings.TrimPrefix(m, host+"/")
		images[src] = p.manifest(repo, "", p.blob(repo, "{}"), nil, "", p.blob(repo, src)).Digest
	}
	dir := t.TempDir()
	if _, err := WriteClusterResources(dir, in); err != nil {
		t.Fatal(err)
	}
	exists := func(t *testing.T, how, ref string) {
		t.Helper()
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			t.Fatalf("%s: %s: %v", how, ref, err)
		}
		d := named.(reference.Digested).Digest()
		resp := headManifest(t, "http://"+reference.Domain(named)+"/v2/"+reference.Path(named)+"/manifests/"+d.String())
		if resp != http.StatusOK {
			t.Errorf("%s: %s: HEAD answered %d", how, ref, resp)
		}
	}
	var idms idmsDoc
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, IDMSFile)), &idms); err != nil {
		t.Fatal(err)
	}
	var conf registriesConfDoc
	if _, err := toml.Decode(string(readFile(t, filepath.Join(dir, RegistriesConfFile))), &conf); err != nil {
		t.Fatal(err)
	}
	for src, d := range images {
		// IDMS and registries.conf: the longest source or prefix matching by
		// whole path components is replaced by its mirror.
		var idmsMirror, confMirror, idmsSource, confPrefix string
		for _, e := range idms.Spec.ImageDigestMirrors {
			if (src == e.Source || strings.HasPrefix(src, e.Source+"/")) && len(e.Source) > len(idmsSource) {
				idmsSource, idmsMirror = e.Source, e.Mirrors[0]
			}
		}
		for _, r := range conf.Registry {
			if (src == r.Prefix || strings.HasPrefix(src, r.Prefix+"/")) && len(r.Prefix) > len(confPrefix) {
				confPrefix, confMirror = r.Prefix, r.Mirror[0].Location
			}
		}
		exists(t, "IDMS", idmsMirror+strings.TrimPrefix(src, idmsSource)+"@"+d.String())
		exists(t, "registries.conf", confMirror+strings.TrimPrefix(src, confPrefix)+"@"+d.String())
		// containerd: the hosts.toml of the source's host; a host URL's path
		// with override_path is the API root, to which the repository's path
		// within its registry is appended (containerd docs/hosts.md).
		named, _ := reference.ParseNormalizedNamed(src)
		var hosts hostsDoc
		if _, err := toml.Decode(string(readFile(t, filepath.Join(dir, ContainerdHostsDir, reference.Domain(named), "hosts.toml"))), &hosts); err != nil {
			t.Fatal(err)
		}
		for url, h := range hosts.Host {
			root := strings.TrimPrefix(url, "https://")
			if !h.OverridePath {
				root += "/v2"
			}
			code := headManifest(t, "http://"+root+"/"+reference.Path(named)+"/manifests/"+d.String())
			if code != http.StatusOK {
				t.Errorf("containerd: %s via %s: HEAD answered %d", src, url, code)
			}
		}
	}
}

func headManifest(t *testing.T, url string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodHead, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterCatalogsNameServedImage starts berth serve in process, pushes
// an OLM package (etcd of the shared fixtures) into namespace community,
// and checks that the catalog image the generated ClusterCatalog and opm
// Deployment name is the one berth publishes there.
func TestClusterCatalogsNameServedImage(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	cfg := &config.Config{Addr: "127.0.0.1:0", Data: t.TempDir()}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	n, err := berthnode.New(ctx, cfg, berthnode.Options{Logger: invQuiet, Metrics: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- n.Serve(ctx) }()
	t.Cleanup(func() {
		stop()
		<-served
		n.Close()
	})
	host := n.Addr().String()

	pkgs, err := pkgformat.LoadRepository(filepath.Join("..", "..", "shared", "fixtures", "olm-community", "etcd"), pkgformat.Options{})
	if err != nil || len(pkgs) == 0 {
		t.Fatalf("the shared OLM fixture etcd: %v (%d versions)", err, len(pkgs))
	}
	art, err := pkgs[0].Artifact()
	if err != nil {
		t.Fatal(err)
	}
	ref, err := client.ParseReference(host + "/community/etcd:" + pkgformat.Tag(pkgs[0].Metadata.Version))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := invClient(t).Push(ctx, ref, art); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	if _, err := WriteClusterResources(dir, ClusterResources{Target: host, OLMNamespaces: []string{"community"}}); err != nil {
		t.Fatal(err)
	}
	var cc struct {
		Spec struct {
			Source struct {
				Image struct {
					Ref string `json:"ref"`
				} `json:"image"`
			} `json:"source"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(readFile(t, filepath.Join(dir, "clustercatalog-community.yaml")), &cc); err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(yamlDocsOf(readFile(t, filepath.Join(dir, "catalogsource-community.yaml")))[0], &d); err != nil {
		t.Fatal(err)
	}
	for what, ref := range map[string]string{"ClusterCatalog": cc.Spec.Source.Image.Ref, "opm Deployment": d.Spec.Template.Spec.Volumes[0].Image.Reference} {
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil || reference.Domain(named) != host {
			t.Fatalf("%s names %q, not an image at %s: %v", what, ref, host, err)
		}
		url := "http://" + host + "/v2/" + reference.Path(named) + "/manifests/" + named.(reference.Tagged).Tag()
		code := 0
		for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if code = headManifest(t, url); code == http.StatusOK {
				break
			}
		}
		if code != http.StatusOK {
			t.Errorf("%s names %s, which berth does not serve (HEAD %d)", what, ref, code)
		}
	}
}
