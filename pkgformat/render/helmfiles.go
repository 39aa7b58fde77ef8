package render

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/gobwas/glob"
	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"
	goyaml "sigs.k8s.io/yaml/goyaml.v3"
)

// files are a chart's files other than its templates and values, as a
// template sees them (.Files), with Helm's methods. A name that leaves the
// chart (absolute, or with ..) is refused: Helm only finds nothing there,
// but a package that tries it is not one to run.
type files map[string][]byte

// newFiles returns the files of a chart.
func newFiles(from []*chart.File) files {
	f := files{}
	for _, file := range from {
		f[file.Name] = file.Data
	}
	return f
}

// check panics with a refusal when name leaves the chart.
func (f files) check(name string) {
	if path.IsAbs(name) || slices.Contains(strings.Split(name, "/"), "..") {
		panic(fmt.Errorf("reads the file %q, outside the chart: %w", name, ErrRefused))
	}
}

// GetBytes returns the content of file name, or nothing when the chart has
// no such file.
func (f files) GetBytes(name string) []byte {
	f.check(name)
	if v, ok := f[name]; ok {
		return v
	}
	return []byte{}
}

// Get returns the content of file name as a string.
func (f files) Get(name string) string { return string(f.GetBytes(name)) }

// Glob returns the files whose names match pattern.
func (f files) Glob(pattern string) files {
	g, err := glob.Compile(pattern, '/')
	if err != nil {
		g, _ = glob.Compile("**")
	}
	out := files{}
	for name, data := range f {
		if g.Match(name) {
			out[name] = data
		}
	}
	return out
}

// AsConfig returns the files as the YAML data of a ConfigMap.
func (f files) AsConfig() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = string(data)
	}
	return toYAML(m)
}

// AsSecrets returns the files as the YAML data of a Secret.
func (f files) AsSecrets() string {
	m := map[string]string{}
	for name, data := range f {
		m[path.Base(name)] = base64.StdEncoding.EncodeToString(data)
	}
	return toYAML(m)
}

// Lines returns the lines of file name.
func (f files) Lines(name string) []string {
	s := f.Get(name)
	if s == "" {
		return []string{}
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

func toYAML(v any) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(data), "\n")
}

func toYAMLPretty(v any) string {
	var data bytes.Buffer
	enc := goyaml.NewEncoder(&data)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return ""
	}
	return strings.TrimSuffix(data.String(), "\n")
}

func fromYAML(s string) map[string]any {
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromYAMLArray(s string) []any {
	a := []any{}
	if err := yaml.Unmarshal([]byte(s), &a); err != nil {
		a = []any{err.Error()}
	}
	return a
}

func toTOML(v any) string {
	var b bytes.Buffer
	if err := toml.NewEncoder(&b).Encode(v); err != nil {
		return err.Error()
	}
	return b.String()
}

func fromTOML(s string) map[string]any {
	m := map[string]any{}
	if err := toml.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(data)
}

func fromJSON(s string) map[string]any {
	m := map[string]any{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		m["Error"] = err.Error()
	}
	return m
}

func fromJSONArray(s string) []any {
	a := []any{}
	if err := json.Unmarshal([]byte(s), &a); err != nil {
		a = []any{err.Error()}
	}
	return a
}
