package render

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"text/template"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// File is a file of a package: its slash-separated path from the package
// root and its content.
type File struct {
	Path string
	Data []byte
}

// The release a chart is rendered for, as `helm template` names it.
const (
	ReleaseName      = "release-name"
	ReleaseNamespace = "default"
)

// Helm renders the chart made of files (Chart.yaml at the root, subcharts
// unpacked under charts/<name>/) as `helm template` does with the chart's
// default values: Helm's loader, its dependency processing (conditions,
// tags, import-values) and values (chartutil), release ReleaseName in
// ReleaseNamespace with Helm's default capabilities, and Helm's template
// functions and rules (partials are not rendered, library charts only
// lend their defines, "<no value>" is blanked, `lookup` finds nothing).
// It returns every template that rendered, and why the others did not.
//
// The error wraps ErrRefused when a template breaks the budget or reads a
// file outside the chart; it is a plain error when the chart does not load.
func Helm(files []File, budget Budget) (*Result, error) {
	buffered := make([]*loader.BufferedFile, len(files))
	for i, f := range files {
		buffered[i] = &loader.BufferedFile{Name: f.Path, Data: f.Data}
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("the chart does not load: %v", err)
	}
	var missing []Failure
	for _, d := range c.Metadata.Dependencies {
		if !slices.ContainsFunc(c.Dependencies(), func(sub *chart.Chart) bool { return sub.Name() == d.Name }) {
			missing = append(missing, Failure{Name: "Chart.yaml", Reason: fmt.Sprintf("dependency %s is not in charts/, so its templates are not rendered", d.Name)})
		}
	}
	vals := chartutil.Values{}
	if err := chartutil.ProcessDependenciesWithMerge(c, vals); err != nil {
		return nil, fmt.Errorf("the chart's dependencies do not resolve: %v", err)
	}
	top, err := chartutil.ToRenderValuesWithSchemaValidation(c, vals,
		chartutil.ReleaseOptions{Name: ReleaseName, Namespace: ReleaseNamespace, Revision: 1, IsInstall: true},
		chartutil.DefaultCapabilities, true)
	if err != nil {
		return nil, fmt.Errorf("the chart's values do not load: %v", err)
	}
	e := newEngine(budget, "zero")
	h := &helmRender{engine: e, templates: map[string]helmTemplate{}}
	h.collect(c, top)
	funcs := e.sprigFuncs("env", "expandenv")
	for name, fn := range helmFuncs {
		funcs[name] = fn
	}
	funcs["include"] = h.include
	funcs["tpl"] = h.tpl
	e.use(funcs)
	res, err := h.render(strings.TrimSuffix(c.ChartFullPath(), "/") + "/")
	if err != nil {
		return nil, err
	}
	res.Failures = append(missing, res.Failures...)
	return res, nil
}

// helmTemplate is a template of the chart or a subchart, with the values
// it renders with.
type helmTemplate struct {
	source   string
	vals     chartutil.Values
	basePath string
}

// helmRender renders the templates of one chart.
type helmRender struct {
	*engine
	templates map[string]helmTemplate
}

// collect gathers the templates of c and its subcharts with the values of
// each chart's scope, as Helm's engine does.
func (h *helmRender) collect(c *chart.Chart, vals chartutil.Values) map[string]any {
	subcharts := map[string]any{}
	next := map[string]any{
		"Chart": struct {
			chart.Metadata
			IsRoot bool
		}{*c.Metadata, c.IsRoot()},
		"Files":        newFiles(c.Files),
		"Release":      vals["Release"],
		"Capabilities": vals["Capabilities"],
		"Values":       chartutil.Values{},
		"Subcharts":    subcharts,
	}
	if c.IsRoot() {
		next["Values"] = vals["Values"]
	} else if vs, err := vals.Table("Values." + c.Name()); err == nil {
		next["Values"] = vs
	}
	for _, child := range c.Dependencies() {
		subcharts[child.Name()] = h.collect(child, next)
	}
	library := strings.EqualFold(c.Metadata.Type, "library")
	for _, t := range c.Templates {
		if t == nil || library && !strings.HasPrefix(path.Base(t.Name), "_") {
			continue
		}
		h.templates[path.Join(c.ChartFullPath(), t.Name)] = helmTemplate{
			source: string(t.Data), vals: next, basePath: path.Join(c.ChartFullPath(), "templates"),
		}
	}
	return next
}

// render parses every template (the shallower first, as Helm does, so that
// a subchart's define does not replace its parent's) and renders those
// that are not partials; root is the root chart's path prefix, which the
// names of the outputs drop.
func (h *helmRender) render(root string) (*Result, error) {
	names := make([]string, 0, len(h.templates))
	for name := range h.templates {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		if da, db := strings.Count(a, "/"), strings.Count(b, "/"); da != db {
			return db - da
		}
		return strings.Compare(b, a)
	})
	res := &Result{}
	var failed []string
	for _, name := range names {
		h.current = strings.TrimPrefix(name, root)
		if _, err := h.parse(h.set, name, h.templates[name].source); err != nil {
			if h.refused != nil {
				return nil, h.refused
			}
			res.Failures = append(res.Failures, Failure{Name: h.current, Reason: "does not parse: " + err.Error()})
			failed = append(failed, name)
		}
	}
	for _, name := range names {
		if strings.HasPrefix(path.Base(name), "_") || slices.Contains(failed, name) {
			continue
		}
		t := h.templates[name]
		h.current = strings.TrimPrefix(name, root)
		t.vals["Template"] = chartutil.Values{"Name": name, "BasePath": t.basePath}
		out, err := h.execute(h.set, name, t.vals)
		switch {
		case h.refused != nil:
			return nil, h.refused
		case err != nil:
			res.Failures = append(res.Failures, Failure{Name: h.current, Reason: "does not render with the default values: " + helmMessage(err)})
		default:
			res.Outputs = append(res.Outputs, Output{Name: h.current, Text: strings.ReplaceAll(out, "<no value>", "")})
		}
	}
	return res, nil
}

// helmMessage is a template error without text/template's prefix and
// without Helm's markers around a required or fail message.
func helmMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "template: ")
	if i := strings.Index(msg, warnStart); i >= 0 {
		msg = msg[:i] + strings.Replace(msg[i+len(warnStart):], warnEnd, "", 1)
	}
	return msg
}

// The markers Helm's required and fail put around their message.
const (
	warnStart = "HELM_ERR_START"
	warnEnd   = "HELM_ERR_END"
)

// include renders the defined template name on data, as Helm's include.
func (h *helmRender) include(name string, data any) (string, error) {
	if _, err := h.enter(); err != nil {
		return "", err
	}
	defer func() { h.depth-- }()
	w := &limitedWriter{e: h.engine, max: h.budget.Output}
	err := h.set.ExecuteTemplate(w, name, data)
	return w.buf.String(), err
}

// tpl renders text as a template that sees the chart's defines, as Helm's
// tpl: its own ranges are counted like those of the chart's files.
func (h *helmRender) tpl(text string, data any) (string, error) {
	if _, err := h.enter(); err != nil {
		return "", err
	}
	defer func() { h.depth-- }()
	if err := h.charge(int64(len(h.set.Templates()))); err != nil {
		return "", err
	}
	outer := h.set
	clone, err := outer.Clone()
	if err != nil {
		return "", err
	}
	clone.Option("missingkey=zero")
	h.set = clone
	defer func() { h.set = outer }()
	t, err := h.parse(clone, h.current+" (tpl)", text)
	if err != nil {
		return "", fmt.Errorf("cannot parse template %q: %v", shorten(text), err)
	}
	w := &limitedWriter{e: h.engine, max: h.budget.Output}
	if err := t.Execute(w, data); err != nil {
		return "", fmt.Errorf("error during tpl function execution for %q: %w", shorten(text), err)
	}
	return strings.ReplaceAll(w.buf.String(), "<no value>", ""), nil
}

// shorten is s cut to a length fit for an error message.
func shorten(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}

// helmFuncs are the functions Helm adds to sprig's, but include and tpl
// (helmRender's): conversions to and from YAML, JSON and TOML, required and
// fail, and lookup, which finds nothing without a cluster.
var helmFuncs = template.FuncMap{
	"toToml":        toTOML,
	"fromToml":      fromTOML,
	"toYaml":        toYAML,
	"toYamlPretty":  toYAMLPretty,
	"fromYaml":      fromYAML,
	"fromYamlArray": fromYAMLArray,
	"toJson":        toJSON,
	"fromJson":      fromJSON,
	"fromJsonArray": fromJSONArray,
	"required": func(warn string, val any) (any, error) {
		if s, ok := val.(string); val == nil || ok && s == "" {
			return val, errors.New(warnStart + warn + warnEnd)
		}
		return val, nil
	},
	"fail":   func(msg string) (string, error) { return "", errors.New(warnStart + msg + warnEnd) },
	"lookup": func(string, string, string, string) (map[string]any, error) { return map[string]any{}, nil },
}
