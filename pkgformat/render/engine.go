// Package render renders the Go templates of Helm charts and KUDO operators
// as their own engines do, within a budget, so that berth can read the
// objects (and so the images) a package deploys with its default values.
//
// Go's text/template cannot be stopped once it runs, so every way a template
// spends time or memory goes through a counter that can stop it: each
// function call, each iteration of a range (the parse tree of every template
// is given a counting action at the start of each range body before it
// runs), each call of a defined template (which also counts the depth of
// nested calls) and each byte written. Functions that build a string or a
// list from a number (until, seq, repeat, indent, printf's widths...) are
// checked before they allocate; the result of every function is checked
// after, for its size and for how deep it nests lists and maps. Actions
// nested too deep for Go's parser are refused before it runs. Costly
// cryptography, random values and the clock are fixed placeholders, so the
// same package always renders the same. A template that spends its budget,
// nests too deep, or reads a file outside its chart is refused with
// ErrRefused, naming the template; ordinary failures (a required value,
// fail, a missing key) only leave that template out of the result.
package render

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"time"
)

// ErrRefused: a template does what no package may (spends more than its
// budget, nests too deep, reads a file outside its chart).
var ErrRefused = errors.New("template refused")

// ErrBudget: a template spends more than its budget (steps, time, output,
// depth). It wraps ErrRefused.
var ErrBudget = fmt.Errorf("%w: over its budget", ErrRefused)

// Budget bounds the rendering of one package. Zero fields take the
// defaults of DefaultBudget.
type Budget struct {
	// Steps bounds the work: one step for every function call, range
	// iteration and defined-template call, plus one for every BytesPerStep
	// bytes of strings and every 16 items of lists and maps a function
	// takes or returns, and for every BytesPerStep bytes written.
	Steps int64
	// Output bounds the bytes one template writes, and the size of any one
	// string or list a function returns.
	Output int64
	// Total bounds the bytes all the templates of the package write
	// together: what the Result holds.
	Total int64
	// Depth bounds nested template calls (template, include, tpl).
	Depth int
	// Timeout bounds the time the whole rendering may take, checked at
	// every step.
	Timeout time.Duration
	// Context, when set, stops the rendering when it ends.
	Context context.Context
}

// BytesPerStep is how many bytes of strings a function takes or returns,
// or a template writes, cost one step: so no rendering builds more than
// Steps × BytesPerStep bytes of strings in all.
const BytesPerStep = 64

// DefaultBudget is 1,000,000 steps, 16 MiB of output per template and 64
// MiB in all, 200 nested template calls and 10 seconds.
func DefaultBudget() Budget {
	return Budget{Steps: 1_000_000, Output: 16 << 20, Total: 64 << 20, Depth: 200, Timeout: 10 * time.Second}
}

// withDefaults fills the zero fields of b.
func (b Budget) withDefaults() Budget {
	d := DefaultBudget()
	if b.Steps <= 0 {
		b.Steps = d.Steps
	}
	if b.Output <= 0 {
		b.Output = d.Output
	}
	if b.Total <= 0 {
		b.Total = d.Total
	}
	if b.Depth <= 0 {
		b.Depth = d.Depth
	}
	if b.Timeout <= 0 {
		b.Timeout = d.Timeout
	}
	if b.Context == nil {
		b.Context = context.Background()
	}
	return b
}

// Output is what one template rendered.
type Output struct {
	// Name is the template's path in the package, e.g.
	// templates/deployment.yaml or charts/db/templates/statefulset.yaml.
	Name string
	Text string
}

// Result is what a package's templates rendered.
type Result struct {
	// Outputs are the templates that rendered, in the order they ran.
	Outputs []Output
	// Failures are the templates that did not.
	Failures []Failure
}

// Failure is a template that did not render, and why.
type Failure struct {
	Name   string
	Reason string
}

// The names of the counting actions added to every parse tree.
const (
	stepFunc  = "berthRenderStep"
	enterFunc = "berthRenderEnter"
	leaveFunc = "berthRenderLeave"
)

// engine is the state of one package's rendering: what it has spent, the
// template running and the first refusal, after which every step fails.
type engine struct {
	budget   Budget
	deadline time.Time
	steps    int64
	written  int64 // bytes of the outputs kept so far
	depth    int
	current  string // the template being rendered, named in refusals
	refused  error
	set      *template.Template
	funcs    template.FuncMap
}

// newEngine returns an engine for budget (defaults filled) whose templates
// have the counting actions' functions and missingkey; use adds the others.
func newEngine(budget Budget, missingkey string) *engine {
	e := &engine{budget: budget.withDefaults()}
	e.deadline = time.Now().Add(e.budget.Timeout)
	e.funcs = template.FuncMap{
		stepFunc:  func() (string, error) { return "", e.charge(1) },
		enterFunc: e.enter,
		leaveFunc: func() string { e.depth--; return "" },
	}
	e.set = template.New("").Funcs(e.funcs).Option("missingkey=" + missingkey)
	return e
}

// use gives e's templates funcs, each counted and checked (wrap).
func (e *engine) use(funcs template.FuncMap) {
	for name, fn := range funcs {
		e.funcs[name] = e.wrap(name, fn)
	}
	e.set.Funcs(e.funcs)
}

// refuse records (once) that the current template spent its budget, for
// why, and returns the refusal.
func (e *engine) refuse(format string, args ...any) error {
	if e.refused == nil {
		e.refused = fmt.Errorf("%s: %s: %w", e.current, fmt.Sprintf(format, args...), ErrBudget)
	}
	return e.refused
}

// charge spends cost steps, and fails once the budget, the time or the
// context is spent.
func (e *engine) charge(cost int64) error {
	if e.refused != nil {
		return e.refused
	}
	e.steps += cost
	switch {
	case e.steps > e.budget.Steps:
		return e.refuse("rendering takes more than %d steps (a loop or a recursion too long for a package)", e.budget.Steps)
	case time.Now().After(e.deadline):
		return e.refuse("rendering takes longer than %s", e.budget.Timeout)
	case e.budget.Context.Err() != nil:
		e.refused = fmt.Errorf("%s: rendering stopped: %w", e.current, e.budget.Context.Err())
		return e.refused
	}
	return nil
}

// enter counts a call of a defined template, and its depth.
func (e *engine) enter() (string, error) {
	e.depth++
	if e.depth > e.budget.Depth {
		return "", e.refuse("templates call each other more than %d deep", e.budget.Depth)
	}
	return "", e.charge(1)
}

// wrap returns fn counted and checked: each call costs a step and the size
// of its arguments, and a result larger than the budget's Output (bytes of
// a string, items of a list or map) is refused. A refusal panics, which
// text/template turns into the error of the call.
func (e *engine) wrap(name string, fn any) any {
	v := reflect.ValueOf(fn)
	t := v.Type()
	return reflect.MakeFunc(t, func(args []reflect.Value) []reflect.Value {
		if err := e.charge(1 + cost(args...)); err != nil {
			panic(err)
		}
		var out []reflect.Value
		if t.IsVariadic() {
			out = v.CallSlice(args)
		} else {
			out = v.Call(args)
		}
		if size := largest(out[0]); size > e.budget.Output {
			panic(e.refuse("%s returns more than %d bytes or items", name, e.budget.Output))
		}
		var visited int64
		if !shallow(out[0], 0, &visited) {
			panic(e.refuse("%s returns lists or maps nested more than %d deep (or one that holds itself)", name, maxValueDepth))
		}
		if err := e.charge(cost(out[0]) + visited/16); err != nil {
			panic(err)
		}
		return out
	}).Interface()
}

// cost is what handling values costs in steps: one for every BytesPerStep bytes of a
// string and every 16 items of a list or map (the outer ones: what a
// function walks is mostly its top level).
func cost(values ...reflect.Value) int64 {
	var n int64
	for _, v := range values {
		for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.String:
			n += int64(v.Len()) / BytesPerStep
		case reflect.Slice, reflect.Array, reflect.Map:
			n += int64(v.Len()) / 16
		}
	}
	return n
}

// maxValueDepth is the deepest a function's result may nest lists and
// maps: what prints, compares or converts a value (fmt, toJson, toYaml,
// deepCopy) recurses for each level, and a map that holds itself (set $d
// "x" $d) would recurse until the stack overflows, which no recover
// catches.
const maxValueDepth = 1000

// shallow reports whether v nests lists and maps at most maxValueDepth
// deep below depth, adding to visited the items it walked. Byte slices
// (file contents) are not walked.
func shallow(v reflect.Value, depth int, visited *int64) bool {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.Map:
		if depth >= maxValueDepth {
			return false
		}
		*visited += int64(v.Len())
		for it := v.MapRange(); it.Next(); {
			if !shallow(it.Value(), depth+1, visited) {
				return false
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return true
		}
		if depth >= maxValueDepth {
			return false
		}
		*visited += int64(v.Len())
		for i := range v.Len() {
			if !shallow(v.Index(i), depth+1, visited) {
				return false
			}
		}
	}
	return true
}

// largest is the length of v when it is a string, list or map.
func largest(v reflect.Value) int64 {
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && !v.IsNil() {
		v = v.Elem()
	}
	switch v.Kind() {
	case reflect.String, reflect.Slice, reflect.Array, reflect.Map:
		return int64(v.Len())
	}
	return 0
}

// parse parses the template source text named name into set, with a
// counting action at the start of every range body and around every
// template body, and returns the template. Errors are the parser's, or a
// refusal when the actions nest deeper than maxNesting.
func (e *engine) parse(set *template.Template, name, text string) (*template.Template, error) {
	if depth := nesting(text); depth > maxNesting {
		return nil, e.refuse("actions nest %d deep, more than %d", depth, maxNesting)
	}
	trees := map[string]*parse.Tree{}
	t := parse.New(name)
	t.Mode = parse.SkipFuncCheck
	if _, err := t.Parse(text, "", "", trees); err != nil {
		return nil, err
	}
	var main *template.Template
	for treeName, tree := range trees {
		instrument(tree)
		added, err := set.AddParseTree(treeName, tree)
		if err != nil {
			return nil, err
		}
		if treeName == name {
			main = added
		}
	}
	if main == nil {
		main = set.Lookup(name)
	}
	return main, nil
}

// maxNesting is the deepest the control actions of a template may nest
// (if, range, with, define, block, each else if counting one more): Go's
// template parser recurses for each, and a few million would overflow the
// stack, which no recover catches. Real templates nest a few levels.
const maxNesting = 1000

// nesting is how deep the control actions of template text nest, read
// from the actions alone without parsing. It may count more than the
// parser does (an action written inside a string), never less: every
// action the parser sees starts where this scan sees one.
func nesting(text string) int {
	var stack []int // the depth each open action adds: one, plus its else-ifs
	depth, deepest := 0, 0
	for {
		start := strings.Index(text, "{{")
		if start < 0 {
			return deepest
		}
		text = text[start+2:]
		end := strings.Index(text, "}}")
		if end < 0 {
			end = len(text)
		}
		keyword, rest := leadingWord(strings.TrimPrefix(text[:end], "-"))
		text = text[end:]
		switch keyword {
		case "if", "range", "with", "define", "block":
			stack = append(stack, 1)
			depth++
		case "else":
			if next, _ := leadingWord(rest); next != "" && len(stack) > 0 {
				stack[len(stack)-1]++
				depth++
			}
		case "end":
			if len(stack) > 0 {
				depth -= stack[len(stack)-1]
				stack = stack[:len(stack)-1]
			}
		}
		deepest = max(deepest, depth)
	}
}

// leadingWord splits s, its leading spaces dropped, into the letters it
// starts with (a keyword, as the template lexer reads one: `if(` is `if`)
// and the rest.
func leadingWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t\r\n")
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	return s[:i], s[i:]
}

// instrument adds the counting actions to tree: enterFunc before and
// leaveFunc after its body, stepFunc at the start of every range body.
func instrument(tree *parse.Tree) {
	root := tree.Root
	if root == nil {
		return
	}
	root.Nodes = append(append([]parse.Node{call(enterFunc, root.Pos)}, root.Nodes...), call(leaveFunc, root.Pos))
	instrumentList(root)
}

func instrumentList(list *parse.ListNode) {
	if list == nil {
		return
	}
	for _, n := range list.Nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			if n.List != nil {
				n.List.Nodes = append([]parse.Node{call(stepFunc, n.List.Pos)}, n.List.Nodes...)
			}
			instrumentList(n.List)
			instrumentList(n.ElseList)
		case *parse.IfNode:
			instrumentList(n.List)
			instrumentList(n.ElseList)
		case *parse.WithNode:
			instrumentList(n.List)
			instrumentList(n.ElseList)
		}
	}
}

// call is the action {{name}} at pos.
func call(name string, pos parse.Pos) *parse.ActionNode {
	cmd := &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{parse.NewIdentifier(name).SetPos(pos)}}
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Pipe: &parse.PipeNode{NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{cmd}}}
}

// limitedWriter collects what a template writes, up to max bytes.
type limitedWriter struct {
	e   *engine
	buf strings.Builder
	max int64
}

// Write implements io.Writer; past max it refuses the template.
func (w *limitedWriter) Write(p []byte) (int, error) {
	if int64(w.buf.Len()+len(p)) > w.max {
		return 0, w.e.refuse("renders more than %d bytes (a template at most %d, the package at most %d)", w.max, w.e.budget.Output, w.e.budget.Total)
	}
	if err := w.e.charge(int64(len(p)) / BytesPerStep); err != nil {
		return 0, err
	}
	return w.buf.Write(p)
}

// execute runs template name of set on data into a bounded buffer. After
// a refusal (or the end of the context), e.refused is set and returned;
// any other error (and a panic) is the template's failure.
func (e *engine) execute(set *template.Template, name string, data any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("rendering failed: %v", r)
		}
		if errors.Is(err, ErrRefused) && e.refused == nil {
			e.refused = fmt.Errorf("%s: %w", e.current, err)
		}
		if e.refused != nil {
			err = e.refused
		}
	}()
	w := &limitedWriter{e: e, max: min(e.budget.Output, e.budget.Total-e.written)}
	depth := e.depth
	err = set.ExecuteTemplate(w, name, data)
	e.depth = depth
	e.written += int64(w.buf.Len())
	return w.buf.String(), err
}
