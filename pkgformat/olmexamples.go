package pkgformat

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
)

// annotationExamples is the CSV annotation holding example custom resources.
const annotationExamples = "alm-examples"

// CSVExamples reads the alm-examples annotation of the ClusterServiceVersion
// file (its path) holding data, parsed as the OLM reader parses a CSV, under
// limits' YAML budget until ctx ends: the examples by "group/Kind", each as
// indented JSON. Examples that are not JSON objects with a kind are left
// out; a CSV that is not YAML, or an annotation that is not a JSON array,
// is an error.
func CSVExamples(ctx context.Context, file string, data []byte, limits Limits) (map[string][]string, error) {
	var csv struct {
		Metadata struct {
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"metadata"`
	}
	if err := decodeYAML(file, data, newYAMLBudget(ctx, limits), &csv); err != nil {
		return nil, err
	}
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(csv.Metadata.Annotations[annotationExamples]), &raw); err != nil {
		return nil, invalid(file, "annotation %s: %v", annotationExamples, err)
	}
	out := make(map[string][]string)
	for _, ex := range raw {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		var buf bytes.Buffer
		if json.Unmarshal(ex, &head) != nil || json.Indent(&buf, ex, "", "  ") != nil {
			continue
		}
		group, _, _ := strings.Cut(head.APIVersion, "/")
		if !strings.Contains(head.APIVersion, "/") {
			group = ""
		}
		out[group+"/"+head.Kind] = append(out[group+"/"+head.Kind], buf.String())
	}
	return out, nil
}
