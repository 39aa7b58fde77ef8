package olm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"strconv"
	"strings"
	"unicode"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/berth-registry/berth/pkgformat"
)

// Kinds of the bundle objects that make properties.
const (
	kindCSV = "ClusterServiceVersion"
	kindCRD = "CustomResourceDefinition"
)

// parsedBundle is what a bundle's manifests and metadata say, read as
// operator-registry reads a bundle image: the first document of each file
// directly in manifests/, the first ClusterServiceVersion among them, the
// CRDs, and metadata/dependencies.yaml and metadata/properties.yaml.
type parsedBundle struct {
	csvPath      string
	csv          *csvObject
	crds         []apiKey
	dependencies []Property
	properties   []Property
}

// apiKey is an API a bundle provides or requires.
type apiKey struct {
	group, version, kind, plural string
}

// objectHeader is the part of a Kubernetes object that says what it is.
type objectHeader struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// crdObject is the part of a CustomResourceDefinition that names its APIs.
type crdObject struct {
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind   string `json:"kind"`
			Plural string `json:"plural"`
		} `json:"names"`
		Version  string `json:"version"`
		Versions []struct {
			Name string `json:"name"`
		} `json:"versions"`
	} `json:"spec"`
}

// parseBundle reads the bundle files of src. Files that do not decode are
// skipped, as operator-registry skips them; a CSV or CRD that does not
// decode is an error, as is a bundle with no CSV.
func parseBundle(src source) (*parsedBundle, error) {
	b := &parsedBundle{}
	objects := 0
	for _, f := range src.files {
		name, inManifests := strings.CutPrefix(f.Path, manifestsDir)
		if !inManifests || strings.Contains(name, "/") || strings.HasPrefix(name, ".") {
			continue
		}
		if err := checkYAMLCost(f.Path, f.Data); err != nil {
			return nil, err
		}
		doc, err := manifestJSON(f.Data)
		if err != nil {
			continue
		}
		var hdr objectHeader
		if json.Unmarshal(doc, &hdr) != nil || hdr.Kind == "" {
			continue
		}
		objects++
		switch {
		case hdr.Kind == kindCSV && b.csv == nil:
			b.csv, b.csvPath = &csvObject{}, f.Path
			if err := json.Unmarshal(doc, b.csv); err != nil {
				return nil, fmt.Errorf("%s: %v: %w", f.Path, err, pkgformat.ErrInvalid)
			}
		case hdr.Kind == kindCRD && (path.Base(hdr.APIVersion) == "v1" || path.Base(hdr.APIVersion) == "v1beta1"):
			var crd crdObject
			if err := json.Unmarshal(doc, &crd); err != nil {
				return nil, fmt.Errorf("%s: %v: %w", f.Path, err, pkgformat.ErrInvalid)
			}
			b.crds = append(b.crds, crd.apis(path.Base(hdr.APIVersion) == "v1beta1")...)
		}
	}
	if b.csv == nil {
		return nil, fmt.Errorf("%s: no ClusterServiceVersion among %d objects: %w", manifestsDir, objects, pkgformat.ErrInvalid)
	}
	for _, f := range src.files {
		var err error
		switch f.Path {
		case bundleDependenciesFile:
			var doc struct {
				Dependencies []Property `json:"dependencies"`
			}
			err = decodeMetadata(f.Path, f.Data, &doc)
			b.dependencies = doc.Dependencies
		case bundlePropertiesFile:
			var doc struct {
				Properties []Property `json:"properties"`
			}
			err = decodeMetadata(f.Path, f.Data, &doc)
			b.properties = doc.Properties
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// apis returns the APIs of a CRD: one per version, and for v1beta1 the
// version of spec.version too.
func (c *crdObject) apis(v1beta1 bool) []apiKey {
	s := &c.Spec
	var out []apiKey
	for _, v := range s.Versions {
		out = append(out, apiKey{group: s.Group, version: v.Name, kind: s.Names.Kind, plural: s.Names.Plural})
	}
	if v1beta1 && s.Version != "" {
		out = append(out, apiKey{group: s.Group, version: s.Version, kind: s.Names.Kind, plural: s.Names.Plural})
	}
	return out
}

// checkYAMLCost refuses a YAML file whose parse could take more memory than
// pkgformat's default limits allow one document, before it is parsed.
func checkYAMLCost(name string, data []byte) error {
	files := []pkgformat.File{{Path: name, Data: data}}
	if pkgformat.ParseCost(files, pkgformat.Limits{MaxYAMLDocumentNodes: math.MaxInt64}) > pkgformat.ParseCost(files, pkgformat.Limits{}) {
		return fmt.Errorf("%s: YAML has more than %d nodes: %w", name, pkgformat.DefaultLimits().MaxYAMLDocumentNodes, pkgformat.ErrLimit)
	}
	return nil
}

// decodeMetadata decodes the first document of a bundle metadata file into
// out as operator-registry does (YAML to JSON, then JSON into out).
func decodeMetadata(name string, data []byte, out any) error {
	if err := checkYAMLCost(name, data); err != nil {
		return err
	}
	doc, err := firstYAMLDocument(data)
	if err == nil {
		err = sigsyaml.Unmarshal(doc, out)
	}
	if err != nil {
		return fmt.Errorf("%s: %v: %w", name, err, pkgformat.ErrInvalid)
	}
	return nil
}

// manifestJSON returns the first document of a manifest file as the JSON
// operator-registry makes of an object: a JSON file's first value, or else
// the first YAML document converted to JSON, with integral numbers as
// integers, object keys sorted and HTML characters escaped.
func manifestJSON(data []byte) ([]byte, error) {
	var v any
	if bytes.HasPrefix(bytes.TrimLeftFunc(data, unicode.IsSpace), []byte("{")) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			return normalJSON(v)
		}
	}
	doc, err := firstYAMLDocument(data)
	if err != nil {
		return nil, err
	}
	j, err := sigsyaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(j))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return normalJSON(v)
}

// firstYAMLDocument returns the first document of a YAML stream as
// Kubernetes' YAML reader splits it: at lines starting with "---" and
// followed by nothing but a comment, skipping empty documents. Another
// line starting with "---" is an error.
func firstYAMLDocument(data []byte) ([]byte, error) {
	start, end := 0, 0
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		rest = rest[len(line):]
		if sep, ok := bytes.CutPrefix(line, []byte("---")); ok {
			if trimmed := bytes.TrimSpace(sep); len(trimmed) > 0 && trimmed[0] != '#' {
				return nil, fmt.Errorf("invalid YAML document separator: %.40q", trimmed)
			}
			if end > start {
				break
			}
			start = len(data) - len(rest)
			end = start
			continue
		}
		end = len(data) - len(rest)
	}
	return data[start:end], nil
}

// normalJSON writes v, decoded with json.Number, as Kubernetes writes an
// unstructured object: numbers that are integers as integers, others as
// floats.
func normalJSON(v any) ([]byte, error) {
	v, err := normalNumbers(v)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// normalNumbers replaces the json.Numbers in v by int64 or float64.
func normalNumbers(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return nil, fmt.Errorf("number %.40s: %w", x, err)
		}
		return f, nil
	case map[string]any:
		for k, e := range x {
			n, err := normalNumbers(e)
			if err != nil {
				return nil, err
			}
			x[k] = n
		}
	case []any:
		for i, e := range x {
			n, err := normalNumbers(e)
			if err != nil {
				return nil, err
			}
			x[i] = n
		}
	}
	return v, nil
}
