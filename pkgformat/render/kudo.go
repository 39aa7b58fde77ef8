package render

import (
	"strings"

	"sigs.k8s.io/yaml"
)

// kudoDropped are the sprig functions KUDO's engine leaves out: they read
// the environment or the file system of its controller.
var kudoDropped = []string{"env", "expandenv", "base", "dir", "clean", "ext", "isAbs"}

// KUDO renders each of templates alone, as KUDO's engine renders a task's
// resources: sprig's functions (but kudoDropped) and toYaml, a missing key
// an error, and vars (OperatorName, Name, Namespace, Params...) as the
// data. It returns every template that rendered, and why the others did
// not; the error wraps ErrRefused when a template breaks the budget.
func KUDO(templates []File, vars map[string]any, budget Budget) (*Result, error) {
	e := newEngine(budget, "error")
	funcs := e.sprigFuncs(kudoDropped...)
	funcs["toYaml"] = func(v any) (string, error) {
		out, err := yaml.Marshal(v)
		return string(out), err
	}
	e.use(funcs)
	res := &Result{}
	for _, t := range templates {
		e.current = t.Path
		set, err := e.set.Clone() // each template alone, as KUDO renders them
		if err != nil {
			return nil, err
		}
		if _, err := e.parse(set, t.Path, string(t.Data)); err != nil {
			res.Failures = append(res.Failures, Failure{Name: t.Path, Reason: "does not parse: " + err.Error()})
			continue
		}
		out, err := e.execute(set, t.Path, vars)
		switch {
		case e.refused != nil:
			return nil, e.refused
		case err != nil:
			res.Failures = append(res.Failures, Failure{Name: t.Path, Reason: "does not render with the default values: " + strings.TrimPrefix(err.Error(), "template: ")})
		default:
			res.Outputs = append(res.Outputs, Output{Name: t.Path, Text: out})
		}
	}
	return res, nil
}
