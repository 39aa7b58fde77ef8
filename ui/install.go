package ui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/berth-registry/berth/catalog"
	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/internal/forwarded"
	"github.com/berth-registry/berth/olm"
	"github.com/berth-registry/berth/pkgformat"
)

// snippet is one way to fetch or install a version: a title and the
// commands or YAML to copy.
type snippet struct {
	Title string
	Code  string
}

// install returns the commands that pull and install v, on the registry's
// address as the viewer reaches it; channel is the OLM channel to subscribe
// to ("" for the version's default). Images name where they live at this
// site: the opm image at its mirror, and, when images of v are mirrored,
// the mirror sets a cluster pulls them through.
func (h *handler) install(r *http.Request, v *apiv1.Version, channel string, imgs *apiv1.VersionImages, mirrors catalog.Mirrors) []snippet {
	base := forwarded.BaseURL(r, h.registryURL)
	host := httpapi.PullHost(base)
	repo := host + "/" + v.Namespace + "/" + v.Name
	tag := pkgformat.Tag(v.Version)
	out := []snippet{
		{"berth", fmt.Sprintf("berth pull %s:%s -o %s", repo, tag, v.Name)},
		{"oras", fmt.Sprintf("oras pull %s:%s", repo, tag)},
	}
	md := v.Metadata
	switch v.Format {
	case pkgformat.Helm:
		out = append(out, snippet{"Helm", fmt.Sprintf("helm install %s oci://%s --version %s", v.Name, repo, v.Version)})
	case pkgformat.KUDO:
		repoName := "berth-" + v.Namespace
		cmd := fmt.Sprintf("kubectl kudo repo add %s %s/%s\nkubectl kudo install %s --repo %s", repoName, base, v.Namespace, v.Name, repoName)
		if md.OperatorVersion != "" {
			cmd += " --operator-version " + md.OperatorVersion
		}
		if md.AppVersion != "" {
			cmd += " --app-version " + md.AppVersion
		}
		out = append(out, snippet{"KUDO", cmd})
	case pkgformat.OLM:
		out = append(out, snippet{"OLM v0 (CatalogSource and Subscription)", olmYAML(host, v, channel, mirrored(mirrors, olm.OpmImage))},
			snippet{"OLM v1 (ClusterCatalog and ClusterExtension)", olmV1YAML(host, v, channel)})
	case pkgformat.Plain:
		out = append(out, snippet{"kubectl", fmt.Sprintf("berth pull %s:%s -o %s\nkubectl apply -R -f %s/manifests", repo, tag, v.Name, v.Name)})
	}
	if sets := mirrorSets(v, imgs); sets != "" {
		out = append(out, snippet{"Image mirrors (apply before installing)", sets})
	}
	return out
}

// olmYAML serves the namespace's catalog image (docs/olm.md) to OLM v0: a
// Deployment running opm serve over the image, mounted as an image volume,
// its Service and a CatalogSource of that address; then a Subscription to
// the package in channel, starting at v. The image holds FBC but no opm
// and no serving cache, so neither an image CatalogSource nor its
// extractContent can serve it. opm is the opm image's reference.
func olmYAML(host string, v *apiv1.Version, channel, opm string) string {
	if channel == "" {
		channel = v.Metadata.DefaultChannel
	}
	if channel == "" && len(v.Metadata.Channels) > 0 {
		channel = v.Metadata.Channels[0].Name
	}
	source := olm.CatalogObjectName(v.Namespace)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
  namespace: olm
spec:
  replicas: 1
  selector:
    matchLabels:
      app: %[1]s
  template:
    metadata:
      labels:
        app: %[1]s
    spec:
      containers:
      - name: opm
        image: %[5]s
        args: [serve, /catalog/configs]
        ports:
        - name: grpc
          containerPort: 50051
        readinessProbe:
          grpc:
            port: 50051
        volumeMounts:
        - name: catalog
          mountPath: /catalog
          readOnly: true
      volumes:
      - name: catalog
        image:
          reference: %[2]s/%[3]s/olm/catalog:latest
          pullPolicy: Always
---
apiVersion: v1
kind: Service
metadata:
  name: %[1]s
  namespace: olm
spec:
  selector:
    app: %[1]s
  ports:
  - name: grpc
    port: 50051
---
apiVersion: operators.coreos.com/v1alpha1
kind: CatalogSource
metadata:
  name: %[1]s
  namespace: olm
spec:
  sourceType: grpc
  address: %[1]s.olm.svc:50051
---
apiVersion: operators.coreos.com/v1alpha1
kind: Subscription
metadata:
  name: %[4]s
  namespace: operators
spec:
  name: %[4]s
  source: %[1]s
  sourceNamespace: olm
`, source, host, v.Namespace, v.Name, opm)
	if channel != "" {
		fmt.Fprintf(&b, "  channel: %s\n", yamlString(channel))
	}
	if v.Metadata.CSVName != "" {
		fmt.Fprintf(&b, "  startingCSV: %s\n", yamlString(v.Metadata.CSVName))
	}
	return b.String()
}

// olmV1YAML is a ClusterCatalog of the namespace's catalog image
// (docs/olm.md) and a ClusterExtension installing exactly v from it, in
// channel when one is known.
func olmV1YAML(host string, v *apiv1.Version, channel string) string {
	source := olm.CatalogObjectName(v.Namespace)
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata:
  name: %s
spec:
  source:
    type: Image
    image:
      ref: %s/%s/olm/catalog:latest
      pollIntervalMinutes: 1
---
apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata:
  name: %s
spec:
  namespace: %s
  serviceAccount:
    name: %s-installer
  source:
    sourceType: Catalog
    catalog:
      packageName: %s
      version: %s
`, source, host, v.Namespace, v.Name, v.Name, v.Name, v.Name, yamlString(v.Version))
	if channel != "" {
		fmt.Fprintf(&b, "      channels: [%s]\n", yamlString(channel))
	}
	fmt.Fprintf(&b, `      selector:
        matchLabels:
          olm.operatorframework.io/metadata.name: %s
`, source)
	return b.String()
}

// yamlString writes s as a YAML scalar: plain when that reads back as the
// same string, else double-quoted.
func yamlString(s string) string {
	plain := s != "" && !strings.ContainsAny(s, ":#{}[],&*!|>'\"%@`\\ \t\n") && !strings.ContainsAny(s[:1], "-?")
	if plain {
		return s
	}
	return fmt.Sprintf("%q", s)
}
