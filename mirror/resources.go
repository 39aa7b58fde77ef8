package mirror

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/distribution/reference"
	"sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/internal/atomicfile"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// ClusterResources are what a cluster needs to pull what an import pushed from the mirror.
type ClusterResources struct {
	// Target is the far registry, host[:port].
	Target string
	// Mirrors map each source repository, or prefix of repositories, or
	// whole source registry (quay.io), to where its images live at
	// Target: TARGET/PREFIX/path (TARGET/PREFIX for a registry).
	Mirrors []apiv1.ImageMirror
	// ByTag are the source repositories some image of which is named by
	// tag; each must be covered by a Mirrors entry.
	ByTag []string
	// OLMNamespaces are the namespaces of imported OLM versions, whose
	// catalog images the far berth serves.
	OLMNamespaces []string
}

// The files WriteClusterResources writes, relative to its directory, and
// the names of the objects in them.
const (
	// IDMSFile holds an ImageDigestMirrorSet (OpenShift, HyperShift).
	IDMSFile = "imagedigestmirrorset.yaml"
	// ITMSFile holds an ImageTagMirrorSet, written when some image is named by tag.
	ITMSFile = "imagetagmirrorset.yaml"
	// RegistriesConfFile is a containers-registries.conf(5) drop-in for
	// CRI-O and podman nodes (/etc/containers/registries.conf.d/).
	RegistriesConfFile = "registries.conf.d/99-berth-mirror.conf"
	// ContainerdHostsDir holds one <host>/hosts.toml per source registry
	// host, for containerd's config_path (/etc/containerd/certs.d).
	ContainerdHostsDir = "containerd/certs.d"
	// MirrorSetName names the ImageDigestMirrorSet and ImageTagMirrorSet.
	MirrorSetName = "berth-mirror"
	// OLMServeNamespace is the namespace of the OLM v0 objects written per
	// namespace catalog (upstream OLM's; openshift-marketplace on OpenShift).
	OLMServeNamespace = "olm"
)

// WriteClusterResources writes into dir (created if need be) what a
// cluster needs to pull from the mirror what an import pushed there (see
// docs/mirror.md, "Cluster resources"): IDMSFile, ITMSFile when r.ByTag is
// not empty, RegistriesConfFile and a containerd hosts.toml per source
// registry host when r.Mirrors is not empty, and for each OLM namespace
// catalogsource-<ns>.yaml (opm serving the namespace's catalog image, and
// its CatalogSource) and clustercatalog-<ns>.yaml. Output is sorted, so the
// same r writes the same bytes; each file replaces any earlier one
// atomically. It returns the paths written.
//
// Every input is checked before anything is written. An error names the
// entry that is wrong: a target that is not host[:port]; a source or mirror
// that is neither a registry host nor a normalised repository name (no
// tag, digest, quote or newline); a mirror not on the target; two mirrors for one source; a
// ByTag repository no mirror covers; an invalid namespace; or mirrors of
// one source registry that do not keep the repository's path under one
// prefix, which containerd, mapping whole registry hosts, cannot express.
func WriteClusterResources(dir string, r ClusterResources) ([]string, error) {
	c, err := checkClusterResources(r)
	if err != nil {
		return nil, err
	}
	files, err := c.render()
	if err != nil {
		return nil, err
	}
	written := make([]string, 0, len(files))
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return written, fmt.Errorf("cluster resources: %w", err)
		}
		if err := atomicfile.Write(path, f.data); err != nil {
			return written, fmt.Errorf("cluster resources: %w", err)
		}
		written = append(written, path)
	}
	return written, nil
}

// checkedResources are ClusterResources checked, deduplicated and sorted.
type checkedResources struct {
	target  string
	mirrors []apiv1.ImageMirror // by Source
	lookup  catalog.Mirrors     // mirrors, to find a repository's
	byTag   []string
	// hostPrefixes are, per source registry host, the repository path at
	// target under which its repositories keep their own paths ("" for
	// none).
	hostPrefixes map[string]string
	namespaces   []string
}

// checkClusterResources checks r (see WriteClusterResources).
func checkClusterResources(r ClusterResources) (*checkedResources, error) {
	if !isRegistryHost(r.Target) {
		return nil, fmt.Errorf("cluster resources: target %q: want a registry, host[:port] (with a dot or a port, or localhost)", r.Target)
	}
	c := &checkedResources{target: r.Target, hostPrefixes: map[string]string{}}
	bySource := map[string]string{}
	prefixOf := map[string]apiv1.ImageMirror{} // the first mirror that set a host's prefix
	for i, m := range r.Mirrors {
		what := fmt.Sprintf("cluster resources: mirrors[%d]", i)
		src, err := parseRepoName(what+": source", m.Source)
		if err != nil {
			return nil, err
		}
		dst, err := parseRepoName(what+": mirror", m.Mirror)
		if err != nil {
			return nil, err
		}
		if dst.host != r.Target {
			return nil, fmt.Errorf("%s: mirror %q is not on the target %s", what, m.Mirror, r.Target)
		}
		if prev, ok := bySource[m.Source]; ok {
			if prev != m.Mirror {
				return nil, fmt.Errorf("%s: source %s has two mirrors, %s and %s", what, m.Source, prev, m.Mirror)
			}
			continue
		}
		bySource[m.Source] = m.Mirror
		c.mirrors = append(c.mirrors, m)
		prefix, ok := hostPrefix(src, dst)
		if !ok {
			return nil, fmt.Errorf("%s: %s -> %s does not keep the repository's path (%s) under a prefix; containerd maps whole registry hosts and cannot express it",
				what, m.Source, m.Mirror, src.path)
		}
		if first, seen := prefixOf[src.host]; !seen {
			prefixOf[src.host], c.hostPrefixes[src.host] = m, prefix
		} else if c.hostPrefixes[src.host] != prefix {
			return nil, fmt.Errorf("%s: %s -> %s and %s -> %s put registry %s under two prefixes; containerd maps whole registry hosts: give one --image-prefix per source registry",
				what, first.Source, first.Mirror, m.Source, m.Mirror, src.host)
		}
	}
	slices.SortFunc(c.mirrors, func(a, b apiv1.ImageMirror) int { return strings.Compare(a.Source, b.Source) })
	c.lookup = catalog.NewMirrors(c.mirrors)
	for i, repo := range r.ByTag {
		what := fmt.Sprintf("cluster resources: byTag[%d]", i)
		if name, err := parseRepoName(what, repo); err != nil {
			return nil, err
		} else if name.path == "" {
			return nil, fmt.Errorf("%s %q: want a repository, host/path", what, repo)
		}
		if _, ok := c.mirrorOf(repo); !ok {
			return nil, fmt.Errorf("%s: no mirror covers %s", what, repo)
		}
		c.byTag = append(c.byTag, repo)
	}
	slices.Sort(c.byTag)
	c.byTag = slices.Compact(c.byTag)
	for i, ns := range r.OLMNamespaces {
		if err := pkgformat.ValidNamespace(ns); err != nil {
			return nil, fmt.Errorf("cluster resources: olmNamespaces[%d]: %w", i, err)
		}
		c.namespaces = append(c.namespaces, ns)
	}
	slices.Sort(c.namespaces)
	c.namespaces = slices.Compact(c.namespaces)
	return c, nil
}

// isRegistryHost reports whether s is a registry host[:port] as image
// references name one: with a dot or a port, or localhost.
func isRegistryHost(s string) bool {
	named, err := reference.ParseNormalizedNamed(s + "/x")
	return err == nil && reference.Domain(named) == s
}

// repoName is a checked repository name, or a registry host alone (every
// repository of the registry): its host, and its path ("" for a host).
type repoName struct{ host, path string }

// parseRepoName parses s: a registry host[:port], or a normalised
// repository name, host/path without tag or digest, as
// reference.ParseNormalizedNamed writes it.
func parseRepoName(what, s string) (repoName, error) {
	if !strings.Contains(s, "/") && isRegistryHost(s) {
		return repoName{host: s}, nil
	}
	named, err := reference.ParseNormalizedNamed(s)
	switch {
	case err != nil:
		return repoName{}, fmt.Errorf("%s %q: not a repository name: %w", what, s, err)
	case !reference.IsNameOnly(named):
		return repoName{}, fmt.Errorf("%s %q: want a repository, without tag or digest", what, s)
	case named.Name() != s:
		return repoName{}, fmt.Errorf("%s %q: want the normalised repository name %s", what, s, named.Name())
	}
	return repoName{reference.Domain(named), reference.Path(named)}, nil
}

// hostPrefix returns the path under which dst keeps the paths of src's
// repositories: dst is TARGET/prefix/path (TARGET/path for an empty
// prefix), or TARGET/prefix for a registry host src. ok is false when dst
// does not end with src's path.
func hostPrefix(src, dst repoName) (prefix string, ok bool) {
	switch {
	case src.path == "":
		return dst.path, true
	case dst.path == src.path:
		return "", true
	}
	return strings.CutSuffix(dst.path, "/"+src.path)
}

// mirrorOf returns where repo lives at the mirror, as the catalog finds
// it (catalog.Mirrors).
func (c *checkedResources) mirrorOf(repo string) (string, bool) {
	loc, ok := c.lookup.Location(catalog.ImageRef{Repository: repo})
	return loc.Repository, ok
}

// resourceFile is one file to write, its name relative to the directory.
type resourceFile struct {
	name string
	data []byte
}

// render returns the files of c, in a fixed order.
func (c *checkedResources) render() ([]resourceFile, error) {
	var files []resourceFile
	add := func(name string, data []byte, err error) error {
		if err != nil {
			return fmt.Errorf("cluster resources: %s: %w", name, err)
		}
		files = append(files, resourceFile{name, data})
		return nil
	}
	if len(c.mirrors) > 0 {
		var digests []sourceMirrors
		for _, m := range c.mirrors {
			digests = append(digests, sourceMirrors{Source: m.Source, Mirrors: []string{m.Mirror}})
		}
		data, err := yamlDocs(mirrorSet("ImageDigestMirrorSet", mirrorSetSpec{ImageDigestMirrors: digests}))
		if err := add(IDMSFile, data, err); err != nil {
			return nil, err
		}
	}
	if len(c.byTag) > 0 {
		var tags []sourceMirrors
		for _, repo := range c.byTag {
			m, _ := c.mirrorOf(repo)
			tags = append(tags, sourceMirrors{Source: repo, Mirrors: []string{m}})
		}
		data, err := yamlDocs(mirrorSet("ImageTagMirrorSet", mirrorSetSpec{ImageTagMirrors: tags}))
		if err := add(ITMSFile, data, err); err != nil {
			return nil, err
		}
	}
	if len(c.mirrors) > 0 {
		data, err := tomlFile(c.registriesConf())
		if err := add(RegistriesConfFile, data, err); err != nil {
			return nil, err
		}
		for _, host := range sortedKeys(c.hostPrefixes) {
			data, err := tomlFile(c.containerdHosts(host))
			if err := add(ContainerdHostsDir+"/"+host+"/hosts.toml", data, err); err != nil {
				return nil, err
			}
		}
	}
	for _, ns := range c.namespaces {
		data, err := yamlDocs(c.olmServe(ns)...)
		if err := add("catalogsource-"+ns+".yaml", data, err); err != nil {
			return nil, err
		}
		data, err = yamlDocs(c.clusterCatalog(ns))
		if err := add("clustercatalog-"+ns+".yaml", data, err); err != nil {
			return nil, err
		}
	}
	return files, nil
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// k8sObject is a Kubernetes object as written: sigs.k8s.io/yaml writes a
// map's keys sorted, so the output is the same for the same input.
type k8sObject = map[string]any

// sourceMirrors is one entry of an ImageDigestMirrorSet or ImageTagMirrorSet.
// mirrorSourcePolicy is left out: the cluster may still contact the source
// (AllowContactingSource), as oc-mirror writes it (docs/mirror.md says why).
type sourceMirrors struct {
	Source  string   `json:"source"`
	Mirrors []string `json:"mirrors"`
}

// mirrorSetSpec is the spec of an ImageDigestMirrorSet or ImageTagMirrorSet.
type mirrorSetSpec struct {
	ImageDigestMirrors []sourceMirrors `json:"imageDigestMirrors,omitempty"`
	ImageTagMirrors    []sourceMirrors `json:"imageTagMirrors,omitempty"`
}

// mirrorSet is a config.openshift.io/v1 mirror set of kind, named MirrorSetName.
func mirrorSet(kind string, spec mirrorSetSpec) k8sObject {
	return k8sObject{
		"apiVersion": "config.openshift.io/v1",
		"kind":       kind,
		"metadata":   k8sObject{"name": MirrorSetName},
		"spec":       spec,
	}
}

// registriesConf is a containers-registries.conf(5) version 2 drop-in.
type registriesConf struct {
	Registry []registryTable `toml:"registry"`
}

// registryTable is one [[registry]] table.
type registryTable struct {
	Prefix   string        `toml:"prefix"`
	Location string        `toml:"location"`
	Mirror   []mirrorTable `toml:"mirror"`
}

// mirrorTable is one [[registry.mirror]] table.
type mirrorTable struct {
	Location       string `toml:"location"`
	PullFromMirror string `toml:"pull-from-mirror"`
}

// registriesConf maps each source to its mirror, for digest pulls only,
// except for the repositories named by tag, whose mirrors serve tag pulls
// too ("all"). A ByTag repository under a prefix source gets its own table,
// the longest prefix winning.
func (c *checkedResources) registriesConf() registriesConf {
	table := func(prefix, mirror, pull string) registryTable {
		return registryTable{Prefix: prefix, Location: prefix, Mirror: []mirrorTable{{Location: mirror, PullFromMirror: pull}}}
	}
	var conf registriesConf
	for _, m := range c.mirrors {
		pull := "digest-only"
		if _, found := slices.BinarySearch(c.byTag, m.Source); found {
			pull = "all"
		}
		conf.Registry = append(conf.Registry, table(m.Source, m.Mirror, pull))
	}
	for _, repo := range c.byTag {
		if !slices.ContainsFunc(c.mirrors, func(m apiv1.ImageMirror) bool { return m.Source == repo }) {
			m, _ := c.mirrorOf(repo)
			conf.Registry = append(conf.Registry, table(repo, m, "all"))
		}
	}
	slices.SortFunc(conf.Registry, func(a, b registryTable) int { return strings.Compare(a.Prefix, b.Prefix) })
	return conf
}

// containerdHostsFile is a containerd hosts.toml (containerd docs/hosts.md).
type containerdHostsFile struct {
	Server string                    `toml:"server"`
	Host   map[string]containerdHost `toml:"host"`
}

// containerdHost is one [host."URL"] table.
type containerdHost struct {
	Capabilities []string `toml:"capabilities"`
	OverridePath bool     `toml:"override_path,omitempty"`
}

// containerdHosts maps the source registry host to the target, under the
// host's prefix. containerd appends /v2 to a mirror URL's path unless
// override_path is set, and then the repository's path: so a prefix is
// written https://TARGET/v2/PREFIX with override_path, which containerd
// asks for https://TARGET/v2/PREFIX/<path>/manifests/<digest>. The mirror
// may resolve tags: it is the site's own registry.
func (c *checkedResources) containerdHosts(host string) containerdHostsFile {
	server := "https://" + host
	if host == "docker.io" {
		server = "https://registry-1.docker.io" // containerd's own default for docker.io
	}
	url, h := "https://"+c.target, containerdHost{Capabilities: []string{"pull", "resolve"}}
	if p := c.hostPrefixes[host]; p != "" {
		url, h.OverridePath = url+"/v2/"+p, true
	}
	return containerdHostsFile{Server: server, Host: map[string]containerdHost{url: h}}
}

// CatalogImage is the reference of namespace's OLM catalog image at the
// berth registry host (docs/olm.md).
func CatalogImage(host, namespace string) string {
	return host + "/" + olm.CatalogRepository(namespace) + ":" + olm.CatalogTag
}

// opmImage is where the cluster pulls opm (olm.OpmImage): under the
// mirror prefix of its registry when some mirror covers that registry,
// else upstream. berth mirror carries the images of packages, not opm:
// docs/mirror.md says how to carry it.
func (c *checkedResources) opmImage() string {
	named, err := reference.ParseNormalizedNamed(olm.OpmImage)
	if err != nil {
		return olm.OpmImage
	}
	prefix, covered := c.hostPrefixes[reference.Domain(named)]
	tagged, isTagged := named.(reference.Tagged)
	if !covered || !isTagged {
		return olm.OpmImage
	}
	return strings.TrimSuffix(c.target+"/"+prefix, "/") + "/" + reference.Path(named) + ":" + tagged.Tag()
}

// olmServe returns what serves namespace's catalog image to OLM v0: the
// image holds FBC but no opm and no cache, so neither an image
// CatalogSource nor its extractContent can serve it (docs/olm.md). A
// Deployment runs opm serve over the image, mounted as an image volume; a
// Service and a CatalogSource of its address follow.
func (c *checkedResources) olmServe(namespace string) []k8sObject {
	name := olm.CatalogObjectName(namespace)
	meta := k8sObject{"name": name, "namespace": OLMServeNamespace}
	labels := k8sObject{"app": name}
	deployment := k8sObject{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   meta,
		"spec": k8sObject{
			"replicas": 1,
			"selector": k8sObject{"matchLabels": labels},
			"template": k8sObject{
				"metadata": k8sObject{"labels": labels},
				"spec": k8sObject{
					"containers": []k8sObject{{
						"name":           "opm",
						"image":          c.opmImage(),
						"args":           []string{"serve", "/catalog" + olm.ConfigsDir},
						"ports":          []k8sObject{{"name": "grpc", "containerPort": 50051}},
						"readinessProbe": k8sObject{"grpc": k8sObject{"port": 50051}},
						"volumeMounts":   []k8sObject{{"name": "catalog", "mountPath": "/catalog", "readOnly": true}},
					}},
					"volumes": []k8sObject{{
						"name":  "catalog",
						"image": k8sObject{"reference": CatalogImage(c.target, namespace), "pullPolicy": "Always"},
					}},
				},
			},
		},
	}
	service := k8sObject{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   meta,
		"spec": k8sObject{
			"selector": labels,
			"ports":    []k8sObject{{"name": "grpc", "port": 50051}},
		},
	}
	catalogSource := k8sObject{
		"apiVersion": "operators.coreos.com/v1alpha1",
		"kind":       "CatalogSource",
		"metadata":   meta,
		"spec": k8sObject{
			"sourceType":  "grpc",
			"address":     name + "." + OLMServeNamespace + ".svc:50051",
			"displayName": "berth " + namespace,
		},
	}
	return []k8sObject{deployment, service, catalogSource}
}

// clusterCatalog is the OLM v1 ClusterCatalog of namespace's catalog image;
// catalogd polls its tag every minute.
func (c *checkedResources) clusterCatalog(namespace string) k8sObject {
	return k8sObject{
		"apiVersion": "olm.operatorframework.io/v1",
		"kind":       "ClusterCatalog",
		"metadata":   k8sObject{"name": olm.CatalogObjectName(namespace)},
		"spec": k8sObject{
			"source": k8sObject{
				"type":  "Image",
				"image": k8sObject{"ref": CatalogImage(c.target, namespace), "pollIntervalMinutes": 1},
			},
		},
	}
}

// resourceHeader starts every file written.
const resourceHeader = "# Written by berth mirror import (docs/mirror.md, \"Cluster resources\").\n"

// yamlDocs writes objs as one YAML stream, the documents separated by ---.
func yamlDocs(objs ...k8sObject) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(resourceHeader)
	for i, o := range objs {
		data, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}

// tomlFile writes v as TOML.
func tomlFile(v any) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(resourceHeader)
	if err := toml.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
