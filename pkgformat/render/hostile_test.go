package render

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// sanityCeiling is how long a hostile template may take in these tests
// before something is clearly wrong: far above the budget's steps, which
// is what stops them.
const sanityCeiling = time.Minute

// hostileChart returns the files of a chart named hostile with the given
// templates (name under templates/ → source) and values.yaml.
func hostileChart(values string, templates map[string]string) []File {
	files := []File{
		{Path: "Chart.yaml", Data: []byte("apiVersion: v2\nname: hostile\nversion: 1.0.0\n")},
		{Path: "values.yaml", Data: []byte(values)},
	}
	for name, src := range templates {
		files = append(files, File{Path: "templates/" + name, Data: []byte(src)})
	}
	return files
}

func TestHostileHelm(t *testing.T) {
	tests := []struct {
		name      string
		values    string
		templates map[string]string
		budget    bool   // refused for its budget (ErrBudget), else for what it reads
		want      string // in the error
	}{
		{"range until", "", map[string]string{"a.yaml": `{{ range until 100000000 }}x{{ end }}`}, true, "templates/a.yaml: until would build more than"},
		{"range untilStep", "", map[string]string{"a.yaml": `{{ range untilStep 0 100000000 1 }}{{ end }}`}, true, "untilStep would build more than"},
		{"nested ranges over values", "l: [1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20]\n", map[string]string{
			"a.yaml": `{{ range .Values.l }}{{ range $.Values.l }}{{ range $.Values.l }}{{ range $.Values.l }}{{ range $.Values.l }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`}, true, "templates/a.yaml: rendering takes more than"},
		{"range over an int", "", map[string]string{"a.yaml": `{{ range 1000000000 }}{{ end }}`}, true, "rendering takes more than"},
		{"define that includes itself twice", "", map[string]string{
			"_h.tpl": `{{ define "twice" }}{{ include "twice" . }}{{ include "twice" . }}{{ end }}`,
			"a.yaml": `{{ include "twice" . }}`}, true, "templates/a.yaml: templates call each other more than"},
		{"template that calls itself twice", "", map[string]string{
			"_h.tpl": `{{ define "t" }}{{ template "t" . }}{{ template "t" . }}{{ end }}`,
			"a.yaml": `{{ template "t" . }}`}, true, "templates call each other more than"},
		{"wide recursion within the depth", "", map[string]string{
			"_h.tpl": `{{ define "t" }}{{ if lt (len .) 40 }}{{ include "t" (append . 1) }}{{ include "t" (append . 2) }}{{ end }}{{ end }}`,
			"a.yaml": `{{ include "t" list }}`}, true, "rendering takes more than"},
		{"repeat", "", map[string]string{"a.yaml": `{{ repeat 100000000 "abcdefgh" }}`}, true, "repeat would build more than"},
		{"doubling a string", "", map[string]string{"a.yaml": `{{ $s := "ab" }}{{ range until 64 }}{{ $s = print $s $s }}{{ end }}`}, true, "print returns more than"},
		{"tpl of a huge loop", "t: '{{ range until 10000 }}{{ range until 10000 }}{{ end }}{{ end }}'\n", map[string]string{"a.yaml": `{{ tpl .Values.t . }}`}, true, "rendering takes more than"},
		{"tpl that calls itself", "t: '{{ tpl $.Values.t $ }}'\n", map[string]string{"a.yaml": `{{ tpl .Values.t . }}`}, true, "templates call each other more than"},
		{"printf widths", "", map[string]string{"a.yaml": `{{ printf "%999999999d" 1 }}`}, true, "printf would build more than"},
		{"indent", "", map[string]string{"a.yaml": `{{ indent 100000000 "x" }}`}, true, "indent would build more than"},
		{"output", "", map[string]string{"a.yaml": `{{ range until 2000 }}{{ repeat 1000 "x" }}{{ end }}`}, true, "renders more than"},
		{"output of many templates", "", map[string]string{"a.yaml": `{{ repeat 800000 "x" }}`, "b.yaml": `{{ repeat 800000 "x" }}`}, true, "renders more than 648576 bytes"},
		{"nested ifs", "", map[string]string{"a.yaml": strings.Repeat("{{ if 1 }}", 2_000_000) + strings.Repeat("{{ end }}", 2_000_000)}, true, "templates/a.yaml: actions nest 2000000 deep, more than 1000"},
		{"else if chain", "", map[string]string{"a.yaml": "{{ if 0 }}" + strings.Repeat("{{- else if 0 -}}", 2_000_000) + "{{ end }}"}, true, "actions nest 2000001 deep"},
		{"deep dicts", "", map[string]string{"a.yaml": `{{ $d := dict }}{{ range until 5000 }}{{ $d = dict "a" $d }}{{ end }}{{ toJson $d }}`}, true, "dict returns lists or maps nested more than 1000 deep"},
		{"a dict that holds itself", "", map[string]string{"a.yaml": `{{ $d := dict }}{{ $_ := set $d "self" $d }}{{ $d }}`}, true, "set returns lists or maps nested more than 1000 deep (or one that holds itself)"},
		{"file outside the chart", "", map[string]string{"a.yaml": `{{ .Files.Get "../../etc/passwd" }}`}, false, `templates/a.yaml: template: hostile/templates/a.yaml:1:9: executing "hostile/templates/a.yaml" at <.Files.Get>: error calling Get: reads the file "../../etc/passwd", outside the chart`},
		{"absolute file", "", map[string]string{"a.yaml": `{{ .Files.GetBytes "/etc/passwd" }}`}, false, `reads the file "/etc/passwd", outside the chart`},
		{"lines outside", "", map[string]string{"a.yaml": `{{ .Files.Lines "x/../../y" }}`}, false, "outside the chart"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			budget := Budget{Output: 1 << 20, Total: 1<<20 + 400000}
			start := time.Now()
			res, err := Helm(hostileChart(tt.values, tt.templates), budget)
			if took := time.Since(start); took > sanityCeiling {
				t.Errorf("took %s", took)
			}
			if !errors.Is(err, ErrRefused) || errors.Is(err, ErrBudget) != tt.budget {
				t.Fatalf("got %v, %v; want refused (budget %v)", res, err, tt.budget)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestHostileKUDO(t *testing.T) {
	tests := []struct {
		name, template string
		want           string
	}{
		{"range until", `{{ range until 100000000 }}x{{ end }}`, "templates/a.yaml: until would build more than"},
		{"nested ranges", `{{ range $.Params.L }}{{ range $.Params.L }}{{ range $.Params.L }}{{ range $.Params.L }}{{ range $.Params.L }}{{ range $.Params.L }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}{{ end }}`, "templates/a.yaml: rendering takes more than"},
		{"recursive define", `{{ define "t" }}{{ template "t" . }}{{ template "t" . }}{{ end }}{{ template "t" . }}`, "templates call each other more than"},
		{"repeat", `{{ repeat 100000000 "abcdefgh" }}`, "repeat would build more than"},
		{"seq", `{{ seq 1 100000000 }}`, "seq would build more than"},
		{"random", `{{ randAlphaNum 100000000 }}`, "randAlphaNum would build more than"},
	}
	vars := map[string]any{"Params": map[string]any{"L": []any{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			res, err := KUDO([]File{{Path: "templates/a.yaml", Data: []byte(tt.template)}}, vars, Budget{Output: 1 << 20})
			if took := time.Since(start); took > sanityCeiling {
				t.Errorf("took %s", took)
			}
			if !errors.Is(err, ErrBudget) {
				t.Fatalf("got %v, %v; want a refusal for the budget", res, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
}

func TestRenderStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Helm(hostileChart("", map[string]string{"a.yaml": `{{ range until 1000 }}{{ end }}`}), Budget{Context: ctx})
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrRefused) {
		t.Fatalf("got %v, want the context's error", err)
	}
}

func TestNesting(t *testing.T) {
	tests := []struct {
		text string
		want int
	}{
		{"a {{ .x }} b", 0},
		{"{{ if .a }}{{ range .b }}{{ end }}{{ end }}{{ with .c }}{{ end }}", 2},
		{"{{- if .a -}}{{- else if .b -}}{{- else -}}{{- end -}}{{ if .c }}{{ end }}", 2},
		{"{{ if .a }}{{ else }}{{ end }}{{ else if }}{{ end }}{{ end }}", 1},
		{`{{ define "x" }}{{ block "y" . }}{{ end }}{{ end }}`, 2},
		{`{{ "}}{{ if" }}{{ if .a }}{{ end }}`, 2},
		{"{{if(eq 1 1)}}{{if(eq 1 1)}}{{else if(eq 2 2)}}{{end}}{{end}}", 3},
		{"{{/* if */}}{{ end }}{{ if", 1},
	}
	for _, tt := range tests {
		if got := nesting(tt.text); got != tt.want {
			t.Errorf("nesting(%q) = %d, want %d", tt.text, got, tt.want)
		}
	}
}
