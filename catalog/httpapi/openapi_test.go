package httpapi_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/berth-registry/berth/catalog/apiv1"
	"github.com/berth-registry/berth/catalog/httpapi"
	"github.com/berth-registry/berth/catalog/httpapi/openapitest"
	"github.com/berth-registry/berth/pkgformat"
	"github.com/berth-registry/berth/sources/webhook"
)

func TestOpenAPIDocumentIsValid(t *testing.T) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(httpapi.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		t.Fatal(err)
	}
	if _, err := openapitest.Document(); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPIOperations checks that the document has exactly the operations
// the handler serves.
func TestOpenAPIOperations(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			got = append(got, method+" "+path)
		}
	}
	slices.Sort(got)
	want := []string{
		"DELETE /api/v1/packages/{namespace}/{name}",
		"GET /api/helm/index.yaml",
		"GET /api/helm/{namespace}/index.yaml",
		"GET /api/helm/{namespace}/{name}/{file}",
		"GET /api/v1/artifacts",
		"GET /api/v1/changes",
		"GET /api/v1/image-mirrors",
		"GET /api/v1/inventory",
		"GET /api/v1/namespaces/{namespace}/usage",
		"GET /api/v1/olm/{namespace}/all",
		"GET /api/v1/olm/{namespace}/metas",
		"GET /api/v1/openapi.yaml",
		"GET /api/v1/packages",
		"GET /api/v1/packages/{namespace}/{name}",
		"GET /api/v1/packages/{namespace}/{name}/channels/{channel}/graph",
		"GET /api/v1/packages/{namespace}/{name}/upgrades",
		"GET /api/v1/packages/{namespace}/{name}/versions/{version}",
		"GET /api/v1/packages/{namespace}/{name}/versions/{version}/files/{path}",
		"GET /api/v1/packages/{namespace}/{name}/versions/{version}/images",
		"GET /api/v1/packages/{namespace}/{name}/versions/{version}/installable",
		"GET /api/v1/packages/{namespace}/{name}/versions/{version}/permissions",
		"GET /api/v1/sources",
		"GET /api/v1/sources/key",
		"GET /api/v1/status",
		"GET /api/v1/usage",
		"GET /index.yaml",
		"GET /{namespace}/index.yaml",
		"POST /api/v1/namespaces/{namespace}/sources/{name}/check",
		"POST /api/v1/packages/{namespace}/{name}/versions/{version}/approval",
		"POST /api/v1/sources/webhook",
		"POST /events",
		"PUT /api/v1/image-mirrors",
	}
	if !slices.Equal(got, want) {
		t.Errorf("operations\n got %v\nwant %v", got, want)
	}
}

// TestOpenAPISchemasMirrorAPIv1 checks that every schema of a JSON document
// has exactly the fields of its Go type, and requires exactly those that Go
// always writes (no omitempty).
func TestOpenAPISchemasMirrorAPIv1(t *testing.T) {
	doc, err := openapitest.Document()
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]any{
		"SearchResponse":     apiv1.SearchResponse{},
		"PackageSummary":     apiv1.PackageSummary{},
		"Facets":             apiv1.Facets{},
		"Package":            apiv1.Package{},
		"VersionSummary":     apiv1.VersionSummary{},
		"Channel":            apiv1.Channel{},
		"Version":            apiv1.Version{},
		"Content":            apiv1.Content{},
		"Signature":          apiv1.Signature{},
		"Attestation":        apiv1.Attestation{},
		"Graph":              apiv1.Graph{},
		"GraphNode":          apiv1.GraphNode{},
		"GraphEdge":          apiv1.GraphEdge{},
		"Upgrades":           apiv1.Upgrades{},
		"Changes":            apiv1.Changes{},
		"Deleted":            apiv1.Deleted{},
		"EventsAccepted":     apiv1.Accepted{},
		"Change":             apiv1.Change{},
		"Artifacts":          apiv1.Artifacts{},
		"Artifact":           apiv1.Artifact{},
		"Status":             apiv1.Status{},
		"Inventory":          apiv1.Inventory{},
		"ReconcileStatus":    apiv1.ReconcileStatus{},
		"ReindexStatus":      apiv1.ReindexStatus{},
		"Errors":             apiv1.Errors{},
		"Error":              apiv1.Error{},
		"Metadata":           pkgformat.Metadata{},
		"Maintainer":         pkgformat.Maintainer{},
		"Link":               pkgformat.Link{},
		"Icon":               pkgformat.Icon{},
		"MetadataChannel":    pkgformat.Channel{},
		"API":                pkgformat.API{},
		"PackageRequirement": pkgformat.PackageRequirement{},
		"Permissions":        pkgformat.Permissions{},
		"PolicyRule":         pkgformat.PolicyRule{},
		"FileInfo":           pkgformat.FileInfo{},
		"Image":              pkgformat.Image{},
		"VersionImages":      apiv1.VersionImages{},
		"VersionImage":       apiv1.VersionImage{},
		"ImageMirrors":       apiv1.ImageMirrors{},
		"ImageMirror":        apiv1.ImageMirror{},
		"Installable":        apiv1.Installable{},
		"ImageCheck":         apiv1.ImageCheck{},
		"Usages":             apiv1.Usages{},
		"NamespaceUsage":     apiv1.NamespaceUsage{},
		"Sources":            apiv1.Sources{},
		"Source":             apiv1.Source{},
		"SourceRef":          apiv1.SourceRef{},
		"SourceVersion":      apiv1.SourceVersion{},
		"SourceError":        apiv1.SourceError{},
		"SourceCheck":        apiv1.SourceCheck{},
		"WebhookResult":      webhook.Result{},
	} {
		ref := doc.Components.Schemas[name]
		if ref == nil {
			t.Errorf("no schema %s", name)
			continue
		}
		s := ref.Value
		var fields, required []string
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			tag := typ.Field(i).Tag.Get("json")
			field, opts, _ := strings.Cut(tag, ",")
			fields = append(fields, field)
			if opts != "omitempty" {
				required = append(required, field)
			}
		}
		var props []string
		for p := range s.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(required)
		slices.Sort(props)
		docRequired := slices.Sorted(slices.Values(s.Required))
		if !slices.Equal(props, fields) {
			t.Errorf("%s: properties %v, Go fields %v", name, props, fields)
		}
		if !slices.Equal(docRequired, required) {
			t.Errorf("%s: required %v, Go always writes %v", name, docRequired, required)
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	res := serve(t, newHandler(newFake(), nil, nil), "GET", "/api/v1/openapi.yaml", nil)
	if string(res.body) != string(httpapi.OpenAPI()) {
		t.Error("the served document differs from httpapi.OpenAPI")
	}
}
