package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/pkgformat"
)

// The repository indexes (DESIGN.md, "Legacy index") are rendered from the
// catalog in two dialects, because no one document satisfies both clients:
// KUDO refuses an index whose entries lack operatorVersion, and Helm reads
// its index strictly and refuses one that has it.
//
// KUDO's index.yaml (github.com/kudobuilder/kudo, pkg/kudoctl/util/repo/index.go
// and repo.go: IndexFile, PackageVersion, Metadata), at /index.yaml and
// /{namespace}/index.yaml, lists every package:
//
//	apiVersion: v1
//	entries:
//	  "<key>":
//	  - name: "<name>"
//	    version: "<operatorVersion>"
//	    operatorVersion: "<operatorVersion>"
//	    appVersion: "<appVersion>"
//	    description: "..."
//	    maintainers: [{name, email}]
//	    digest: "<sha256 hex of the content tarball>"
//	    created: "<RFC 3339 time>"
//	    urls: ["<registry>/v2/<namespace>/<name>/blobs/<content digest>"]
//
// Helm's index.yaml (helm.sh/helm/v3, pkg/repo/index.go: IndexFile,
// ChartVersion, and pkg/chart/metadata.go: Metadata), at
// /api/helm/index.yaml and /api/helm/{namespace}/index.yaml, so that
// `helm repo add <name> <server>/api/helm[/<namespace>]` finds it as
// "<url>/index.yaml". The paths are outside /{namespace}/index.yaml, so no
// namespace's KUDO index is hidden by them. It lists only the Helm charts
// pushed by `helm push` (chart layer pkgformat.HelmChartContentMediaType, format
// helm), whose chart layer is the `helm package` tarball. A berth package of
// format helm is left out: its content has Chart.yaml at the root of the
// tarball, and Helm's archive loader, which strips each path's first
// component, refuses such a chart ("chart yaml not in base directory"). Each
// entry carries only fields of Helm's ChartVersion, from the version's
// metadata (which the catalog reads from the chart's Chart.yaml):
//
//	apiVersion: v1
//	entries:
//	  "<key>":
//	  - name: "<name>"
//	    version: "<version>"
//	    appVersion: "<appVersion>"
//	    description: "..."
//	    keywords: ["..."]
//	    home: "<URL>"
//	    sources: ["<URL>"]
//	    maintainers: [{name, email, url}]
//	    icon: "<URL>"
//	    created: "<RFC 3339 time>"
//	    digest: "<sha256 hex of the chart tarball>"
//	    urls: ["[<namespace>/]<name>/<name>-<version>.tgz"]
//
// The urls are relative to the repository's URL, as Helm resolves them (and
// as `helm repo index` writes them), and name the file as Helm names a
// chart, because Helm saves a download under the last segment of its URL:
// GET /api/helm/{namespace}/{name}/{name}-{version}.tgz redirects (307) to
// the blob of the chart layer in the registry, under the same base URL as
// KUDO's download links.
//
// The catalog's metadata does not keep a chart's apiVersion, type or the
// repositories of its dependencies, so those are left out: Helm reads them
// from the chart itself once downloaded, and takes an entry's missing
// apiVersion as v1 when it loads the index.
//
// Versions. KUDO clients since 0.10 read operatorVersion and appVersion,
// refuse a whole index in which any entry lacks operatorVersion, and match
// a requested version against each field separately; older KUDO clients
// read version. So in KUDO's index operatorVersion and version both hold a
// KUDO package's operatorVersion, and for every other format its version (a
// Helm chart's version); appVersion is the package's appVersion. Each entry's
// versions are newest first as KUDO orders them: by appVersion, then
// operatorVersion, for KUDO packages; by catalog.VersionKey otherwise, which
// is also Helm's order.
//
// Keys. /{namespace}/index.yaml keys entries by package name. /index.yaml
// covers every namespace: a name found in one namespace is its own key; a
// name found in several namespaces is keyed "<namespace>/<name>" in each of
// them, so that no package hides another. Names cannot contain '/', so the
// two kinds of key never collide. Knowing which names are shared takes a first
// walk that keeps only the set of names. Helm's indexes key the same way,
// counting only the charts they list; Helm resolves "<repo>/<ns>/<name>" to
// the key "<ns>/<name>".
//
// An index is written while the catalog is walked, holding one package's
// versions at a time. It carries no generated time, so that its bytes depend
// only on the catalog's state; its strong ETag is derived from the head of
// the caller's change feed (catalog.Catalog.FeedHead, which moves only with
// changes the caller may see), the path, the download base URL and the
// caller's access (its Key; an access without one gets no ETag).

// indexBufferSize is how much of the index is written at once.
const indexBufferSize = 32 << 10

// dialect is the client an index is written for.
type dialect int

const (
	kudoDialect dialect = iota
	helmDialect
)

// lists reports whether the index of dialect d lists entry e.
func (d dialect) lists(e *catalog.Entry) bool {
	if e.Content.Digest == "" {
		return false
	}
	if d == helmDialect {
		return e.Content.MediaType == pkgformat.HelmChartContentMediaType && e.Metadata != nil && e.Metadata.Format == pkgformat.Helm
	}
	return true
}

// index answers GET /index.yaml and GET /{namespace}/index.yaml, KUDO's index.
func (h *handler) index(w http.ResponseWriter, r *http.Request) error {
	return h.serveIndex(w, r, kudoDialect)
}

// helmIndex answers GET /api/helm/index.yaml and GET
// /api/helm/{namespace}/index.yaml, Helm's index of its charts.
func (h *handler) helmIndex(w http.ResponseWriter, r *http.Request) error {
	return h.serveIndex(w, r, helmDialect)
}

// helmChartPath is the download link of a chart version, relative to its
// namespace's Helm repository /api/helm/{namespace}/: Helm names the file it
// saves after the link's last segment, which is <name>-<version>.tgz as in a
// repository Helm writes itself.
func helmChartPath(name, version string) string {
	return name + "/" + name + "-" + version + ".tgz"
}

// helmChart answers GET /api/helm/{namespace}/{name}/{name}-{version}.tgz,
// the download link of a chart in Helm's index, with a redirect to the blob
// of the chart's layer in the registry.
func (h *handler) helmChart(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := PackagePath(r)
	if err != nil {
		return err
	}
	file, err := pathParam(r, "file")
	if err != nil {
		return err
	}
	version, prefixed := strings.CutPrefix(file, name+"-")
	version, suffixed := strings.CutSuffix(version, ".tgz")
	if !prefixed || !suffixed || pkgformat.ValidVersion(version) != nil {
		return pathError("file", "%s is not %s-<version>.tgz", quote(file), name)
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	v, err := h.cat.Version(r.Context(), access, ns, name, version)
	if err != nil {
		return err
	}
	if v.Format != pkgformat.Helm || v.Content.MediaType != pkgformat.HelmChartContentMediaType {
		return fmt.Errorf("%s/%s:%s is not a Helm chart pushed by helm push: %w", ns, name, version, catalog.ErrNotFound)
	}
	http.Redirect(w, r, h.downloadBase(r)+"/v2/"+ns+"/"+name+"/blobs/"+v.Content.Digest, http.StatusTemporaryRedirect)
	return nil
}

// serveIndex writes the index of dialect d for the namespace of the path, or
// for every namespace.
func (h *handler) serveIndex(w http.ResponseWriter, r *http.Request, d dialect) error {
	var ns string
	if chi.URLParam(r, "namespace") != "" {
		var err error
		if ns, err = NamespaceParam(r); err != nil {
			return err
		}
	}
	access, err := h.pullable(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	head, err := h.cat.FeedHead(ctx, access)
	if err != nil {
		return err
	}
	base := h.downloadBase(r)
	w.Header().Set("Cache-Control", "no-cache")
	if etag := indexETag(head, r.URL.Path, base, access); etag != "" {
		w.Header().Set("ETag", etag)
		if etagMatches(r.Header.Values("If-None-Match"), etag) {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
	}

	var shared map[string]bool
	if ns == "" {
		if shared, err = h.sharedNames(ctx, access, d); err != nil {
			return err
		}
	}
	w.Header().Set("Content-Type", mediaTypeYAML)
	iw := &indexWriter{
		w:       bufio.NewWriterSize(w, indexBufferSize),
		dialect: d,
		base:    base,
		all:     ns == "",
		shared:  shared,
		plain:   map[string]bool{},
	}
	if err := h.cat.Walk(ctx, access, ns, iw.add); err != nil {
		return err
	}
	return iw.close()
}

// sharedNames walks the catalog once and returns the names of the packages
// that the index of dialect d lists in more than one namespace.
func (h *handler) sharedNames(ctx context.Context, access catalog.Access, d dialect) (map[string]bool, error) {
	first := map[string]string{} // name → first namespace it was seen in
	shared := map[string]bool{}
	err := h.cat.Walk(ctx, access, "", func(e *catalog.Entry) error {
		if !d.lists(e) {
			return nil
		}
		if ns, ok := first[e.Name]; !ok {
			first[e.Name] = e.Namespace
		} else if ns != e.Namespace {
			shared[e.Name] = true
		}
		return nil
	})
	return shared, err
}

// downloadBase is the base URL of the download links: the registry URL
// when set, else the external base URL of r (forwarded.BaseURL).
func (h *handler) downloadBase(r *http.Request) string {
	return forwarded.BaseURL(r, h.registryURL)
}

// indexETag is the strong entity tag of an index: the same feed head of the
// caller, path, download base and access always render the same bytes. An
// access with no Key has none ("").
func indexETag(seq int64, path, base string, access catalog.Access) string {
	who := "*"
	if !access.All {
		if access.Key == "" {
			return ""
		}
		who = "key:" + access.Key
	}
	sum := sha256.Sum256([]byte(path + "\x00" + base + "\x00" + who))
	return `"idx-` + strconv.FormatInt(seq, 10) + "-" + hex.EncodeToString(sum[:8]) + `"`
}

// etagMatches reports whether If-None-Match values name etag, or are "*".
// If-None-Match compares weakly (RFC 9110, 13.1.2): W/ is ignored.
func etagMatches(values []string, etag string) bool {
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			t = strings.TrimSpace(t)
			if t == "*" || strings.TrimPrefix(t, "W/") == etag {
				return true
			}
		}
	}
	return false
}

// indexVersion is what an index says of one version.
type indexVersion struct {
	tag                               string
	version, appVersion               string // KUDO's index also writes version as operatorVersion
	description, digest, created, url string
	maintainers                       []pkgformat.Maintainer
	keywords, sources                 []string // Helm's index only
	home, icon                        string   // Helm's index only
	order1, order2                    string   // sort keys, ascending
}

// indexWriter writes the index as Walk delivers entries, one package at a time.
type indexWriter struct {
	w       *bufio.Writer
	dialect dialect
	base    string
	// all is set for the index of every namespace, whose shared names are
	// keyed "<namespace>/<name>". plain holds the names already keyed by
	// name alone: one that shows up in a second namespace although the first
	// walk did not see it shared (it was pushed in between) is keyed by
	// namespace too, so that no key is ever written twice.
	all           bool
	shared, plain map[string]bool

	namespace, name string // of the package being gathered
	versions        []indexVersion
	entries         bool // whether "entries:" has been written
}

// add gathers e into its package, writing the previous package when e starts
// a new one.
func (iw *indexWriter) add(e *catalog.Entry) error {
	if e.Namespace != iw.namespace || e.Name != iw.name {
		if c := cmp.Or(cmp.Compare(e.Namespace, iw.namespace), cmp.Compare(e.Name, iw.name)); c < 0 {
			return fmt.Errorf("catalog walk out of order: %s/%s after %s/%s", e.Namespace, e.Name, iw.namespace, iw.name)
		}
		if err := iw.writePackage(); err != nil {
			return err
		}
		iw.namespace, iw.name = e.Namespace, e.Name
	}
	if v, ok := iw.version(e); ok {
		iw.versions = append(iw.versions, v)
	}
	return nil
}

// version maps an entry to the index's view of it; ok is false for an entry
// the index does not list.
func (iw *indexWriter) version(e *catalog.Entry) (v indexVersion, ok bool) {
	if !iw.dialect.lists(e) {
		return v, false
	}
	md := e.Metadata
	if md == nil {
		md = &pkgformat.Metadata{Version: e.Tag}
	}
	created := e.Indexed
	if md.Created != nil {
		created = *md.Created
	}
	v = indexVersion{
		tag:         e.Tag,
		version:     cmp.Or(md.OperatorVersion, md.Version, e.Tag),
		appVersion:  md.AppVersion,
		description: md.Description,
		maintainers: slices.Clone(md.Maintainers), // the walk may reuse md
		created:     created.UTC().Format(time.RFC3339Nano),
		url:         iw.base + "/v2/" + e.Namespace + "/" + e.Name + "/blobs/" + e.Content.Digest,
		order1:      catalog.VersionKey(cmp.Or(md.Version, e.Tag)),
	}
	if hexDigest, ok := strings.CutPrefix(e.Content.Digest, "sha256:"); ok {
		v.digest = hexDigest
	}
	if md.OperatorVersion != "" {
		v.order1, v.order2 = catalog.VersionKey(md.AppVersion), catalog.VersionKey(md.OperatorVersion)
	}
	if iw.dialect == helmDialect {
		v.url = helmChartPath(e.Name, md.Version)
		if iw.all {
			v.url = e.Namespace + "/" + v.url
		}
		v.keywords = slices.Clone(md.Keywords)
		for _, l := range md.Links {
			switch l.Name {
			case "Home":
				v.home = cmp.Or(v.home, l.URL)
			case "Source":
				v.sources = append(v.sources, l.URL)
			}
		}
		if md.Icon != nil {
			v.icon = md.Icon.URL
		}
	}
	return v, true
}

// writePackage writes the gathered versions of the current package, newest first.
func (iw *indexWriter) writePackage() error {
	if len(iw.versions) == 0 {
		return nil
	}
	slices.SortFunc(iw.versions, func(a, b indexVersion) int {
		return cmp.Or(cmp.Compare(b.order1, a.order1), cmp.Compare(b.order2, a.order2), cmp.Compare(b.tag, a.tag))
	})
	key := iw.name
	switch {
	case !iw.all:
	case iw.shared[iw.name] || iw.plain[iw.name]:
		key = iw.namespace + "/" + iw.name
	default:
		iw.plain[iw.name] = true
	}
	w := iw.w
	if !iw.entries {
		w.WriteString("apiVersion: v1\nentries:\n")
		iw.entries = true
	}
	fmt.Fprintf(w, "  %s:\n", yamlString(key))
	for _, v := range iw.versions {
		if iw.dialect == helmDialect {
			writeHelmVersion(w, iw.name, v)
		} else {
			writeKUDOVersion(w, iw.name, v)
		}
	}
	iw.versions = iw.versions[:0]
	_, err := w.Write(nil) // a bufio.Writer keeps its first write error
	return err
}

// writeKUDOVersion writes one version of package name as KUDO reads it.
func writeKUDOVersion(w *bufio.Writer, name string, v indexVersion) {
	fmt.Fprintf(w, "  - name: %s\n", yamlString(name))
	fmt.Fprintf(w, "    version: %s\n", yamlString(v.version))
	fmt.Fprintf(w, "    operatorVersion: %s\n", yamlString(v.version))
	writeOptional(w, "appVersion", v.appVersion)
	writeOptional(w, "description", v.description)
	writeMaintainers(w, v.maintainers, false)
	writeOptional(w, "digest", v.digest)
	fmt.Fprintf(w, "    created: %s\n", yamlString(v.created))
	fmt.Fprintf(w, "    urls:\n    - %s\n", yamlString(v.url))
}

// writeHelmVersion writes one version of chart name as Helm reads it: only
// fields of Helm's ChartVersion, which Helm decodes strictly.
func writeHelmVersion(w *bufio.Writer, name string, v indexVersion) {
	fmt.Fprintf(w, "  - name: %s\n", yamlString(name))
	fmt.Fprintf(w, "    version: %s\n", yamlString(v.version))
	writeOptional(w, "appVersion", v.appVersion)
	writeOptional(w, "description", v.description)
	writeList(w, "keywords", v.keywords)
	writeOptional(w, "home", v.home)
	writeList(w, "sources", v.sources)
	writeMaintainers(w, v.maintainers, true)
	writeOptional(w, "icon", v.icon)
	fmt.Fprintf(w, "    created: %s\n", yamlString(v.created))
	writeOptional(w, "digest", v.digest)
	fmt.Fprintf(w, "    urls:\n    - %s\n", yamlString(v.url))
}

// writeMaintainers writes the maintainers of a version, unless there are
// none, with their URLs if withURL is set (KUDO's Maintainer has no URL).
func writeMaintainers(w *bufio.Writer, maintainers []pkgformat.Maintainer, withURL bool) {
	if len(maintainers) == 0 {
		return
	}
	w.WriteString("    maintainers:\n")
	for _, m := range maintainers {
		fmt.Fprintf(w, "    - name: %s\n", yamlString(m.Name))
		if m.Email != "" {
			fmt.Fprintf(w, "      email: %s\n", yamlString(m.Email))
		}
		if withURL && m.URL != "" {
			fmt.Fprintf(w, "      url: %s\n", yamlString(m.URL))
		}
	}
}

// writeList writes a list of strings of a version, unless it is empty.
func writeList(w *bufio.Writer, key string, values []string) {
	if len(values) == 0 {
		return
	}
	fmt.Fprintf(w, "    %s:\n", key)
	for _, s := range values {
		fmt.Fprintf(w, "    - %s\n", yamlString(s))
	}
}

// writeOptional writes a string field of a version, unless it is empty.
func writeOptional(w *bufio.Writer, key, value string) {
	if value != "" {
		fmt.Fprintf(w, "    %s: %s\n", key, yamlString(value))
	}
}

// close writes the last package and ends the index.
func (iw *indexWriter) close() error {
	if err := iw.writePackage(); err != nil {
		return err
	}
	if !iw.entries {
		iw.w.WriteString("apiVersion: v1\nentries: {}\n")
	}
	return iw.w.Flush()
}

// yamlString quotes s as a YAML double-quoted scalar that every YAML 1.1 and
// 1.2 parser reads back as s: JSON's escapes, which YAML shares, for '"',
// '\\' and every character YAML does not allow unescaped (C0 and C1 controls,
// DEL, the byte-order mark, line and paragraph separators). Invalid UTF-8
// becomes U+FFFD.
func yamlString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20, r >= 0x7f && r <= 0x9f, r == 0xfeff, r == 0x2028, r == 0x2029, r >= 0xfffe && r <= 0xffff:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r) // utf8.RuneError for invalid bytes
		}
	}
	b.WriteByte('"')
	return b.String()
}
