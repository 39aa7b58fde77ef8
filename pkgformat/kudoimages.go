package pkgformat

import (
	"strings"

	"github.com/berth-registry/berth/pkgformat/render"
	"go.yaml.in/yaml/v3"
)

// kudoParamsFile is a KUDO operator's parameters.
const kudoParamsFile = "params.yaml"

// kudoParams is KUDO's params.yaml (kudo.dev/v1beta1).
type kudoParams struct {
	Parameters []struct {
		Name    string    `yaml:"name"`
		Type    string    `yaml:"type"`
		Default yaml.Node `yaml:"default"`
	} `yaml:"parameters"`
}

// The instance a KUDO operator is rendered for: the one `kubectl kudo
// install` creates by default.
const (
	kudoInstanceSuffix = "-instance"
	kudoNamespace      = "default"
	kudoPlan           = "deploy"
)

// kudoImages renders the operator's templates with its parameters'
// defaults (render.KUDO) and reads the images of what they rendered
// (renderedImages). A parameter with no default is nil, as in KUDO, and
// each pipe key of a Pipe task names a ConfigMap or Secret of the instance.
func (pf *pkgFiles) kudoImages(op *kudoOperator) ([]Image, string, error) {
	params := map[string]any{}
	if data := pf.data(kudoParamsFile); data != nil {
		var p kudoParams
		if err := decodeYAML(kudoParamsFile, data, pf.yaml, &p); err != nil {
			return nil, "", err
		}
		for _, param := range p.Parameters {
			params[param.Name] = pf.kudoDefault(param.Type, &param.Default)
		}
	}
	instance := op.Name + kudoInstanceSuffix
	pipes := map[string]any{}
	for _, t := range op.Tasks {
		for _, p := range t.Spec.Pipe {
			pipes[p.Key] = strings.ToLower(instance + "-" + p.Key)
		}
	}
	vars := map[string]any{
		"OperatorName":    op.Name,
		"Name":            instance,
		"Namespace":       kudoNamespace,
		"AppVersion":      op.AppVersion,
		"OperatorVersion": op.OperatorVersion,
		"Params":          params,
		"Pipes":           pipes,
		"PlanName":        kudoPlan,
		"PhaseName":       "",
		"StepName":        "",
	}
	var templates []render.File
	for _, f := range yamlFiles(pf.under("templates")) {
		templates = append(templates, render.File{Path: f.Path, Data: f.Data})
	}
	res, err := render.KUDO(templates, vars, pf.renderBudget())
	return pf.renderedImages(res, err)
}

// kudoDefault is a parameter's default as KUDO gives it to templates: a
// string, but for the array and dict types, whose default is YAML (written
// as such, or as a string that holds it); nil when there is none.
func (pf *pkgFiles) kudoDefault(typ string, n *yaml.Node) any {
	if n.Kind == 0 || n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	structured := typ == "array" || typ == "dict"
	if n.Kind == yaml.ScalarNode && !structured {
		return n.Value
	}
	var v any
	if n.Kind == yaml.ScalarNode {
		if decodeYAML(kudoParamsFile, []byte(n.Value), pf.yaml, &v) != nil {
			return n.Value
		}
		return v
	}
	if n.Decode(&v) != nil {
		return nil
	}
	return v
}
