package runprofile

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// evaluator walks the templates from the entrypoint, as Argo would call them.
type evaluator struct {
	opts      Options
	spec      workflowSpec
	workflow  string
	templates map[string]map[string]any
	wfParams  map[string]string
	// kfpParams are a KFP run's pipeline parameters: the root driver's runtime-config over the
	// root component's defaults.
	kfpParams map[string]any
	prof      *Profile
	err       error
}

// result is what one call of a template asks for.
type result struct {
	peak    [numDims]int64
	witness []PodCount // pods that hold peak[0] together
	levels  int        // the longest chain of pod steps in it
	steps   []int      // its steps, in Profile.Steps
	outputs map[string]string
}

func (e *evaluator) fail(format string, args ...any) *result {
	if e.err == nil {
		e.err = fmt.Errorf(format, args...)
	}
	return &result{}
}

// assume records an assumption; unbounded ones make the profile Unbounded.
func (e *evaluator) assume(unbounded bool, format string, args ...any) {
	e.prof.Bounds = append(e.prof.Bounds, fmt.Sprintf(format, args...))
	e.prof.Unbounded = e.prof.Unbounded || unbounded
}

// ---- Parameters ------------------------------------------------------------------------------

// unknownMark replaces an expression whose value is not known before the run. It is carried
// into every value built from it, so "known" is simply "carries no mark"; the rune is one no
// workflow uses.
const unknownMark = "\u2047"

func known(s string) bool { return !strings.Contains(s, unknownMark) }

func unknownValue(expr string) string { return unknownMark + "(" + expr + ")" }

var expression = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// lookup resolves one expression: its value and true, or false to leave it as written (another
// pass, or Argo at run time, resolves it). An expression it knows but cannot resolve resolves
// to unknownValue.
type lookup func(expr string) (string, bool)

func substitute(s string, f lookup) string {
	if !strings.Contains(s, "{{") {
		return s
	}
	return expression.ReplaceAllStringFunc(s, func(m string) string {
		if v, ok := f(expression.FindStringSubmatch(m)[1]); ok {
			return v
		}
		return m
	})
}

// substituteTree substitutes every string of a JSON tree, returning a new tree.
func substituteTree(v any, f lookup) any {
	switch v := v.(type) {
	case string:
		return substitute(v, f)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			// Keys too: KFP names pod annotations from parameters.
			out[substitute(k, f)] = substituteTree(x, f)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = substituteTree(x, f)
		}
		return out
	}
	return v
}

// templateScope resolves a template's inputs and the workflow's parameters and variables;
// tasks, steps and items are left to the DAG or steps that calls them (taskScope).
func (e *evaluator) templateScope(inputs map[string]string) lookup {
	return func(expr string) (string, bool) {
		switch {
		case strings.HasPrefix(expr, "inputs.parameters."):
			if v, ok := inputs[strings.TrimPrefix(expr, "inputs.parameters.")]; ok {
				return v, true
			}
			return unknownValue(expr), true
		case strings.HasPrefix(expr, "workflow.parameters."):
			if v, ok := e.wfParams[strings.TrimPrefix(expr, "workflow.parameters.")]; ok {
				return v, true
			}
			return unknownValue(expr), true
		case strings.HasPrefix(expr, "workflow."):
			return unknownValue(expr), true
		}
		return "", false
	}
}

// taskScope resolves what a DAG task or step refers to: earlier tasks' outputs and its item.
func taskScope(outputs map[string]map[string]string, item *string) lookup {
	return func(expr string) (string, bool) {
		switch {
		case expr == "item" || strings.HasPrefix(expr, "item."):
			if item == nil {
				return unknownValue(expr), true
			}
			if expr == "item" {
				return *item, true
			}
			var m map[string]any
			if json.Unmarshal([]byte(*item), &m) == nil {
				if v, ok := m[strings.TrimPrefix(expr, "item.")]; ok {
					return scalar(v), true
				}
			}
			return unknownValue(expr), true
		case strings.HasPrefix(expr, "tasks.") || strings.HasPrefix(expr, "steps."):
			parts := strings.SplitN(expr, ".", 5) // tasks.<name>.outputs.parameters.<p>
			if len(parts) == 5 && parts[2] == "outputs" && parts[3] == "parameters" {
				if v, ok := outputs[parts[1]][parts[4]]; ok {
					return v, true
				}
			}
			return unknownValue(expr), true
		}
		return "", false
	}
}

// scalar writes a JSON value as Argo substitutes it: strings as they are, the rest as JSON.
func scalar(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	if f, ok := v.(float64); ok {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ---- Templates -------------------------------------------------------------------------------

// invoke evaluates one call of a template with its arguments.
func (e *evaluator) invoke(name, path string, args map[string]string, depth int) *result {
	raw, ok := e.templates[name]
	if !ok {
		return e.fail("%s: template %q: no such template in spec.templates", path, name)
	}
	if depth > maxDepth {
		e.assume(true, "%s: templates nest deeper than %d (recursion); the deeper calls are not counted", path, maxDepth)
		return &result{}
	}
	var decl struct {
		Inputs arguments `json:"inputs"`
	}
	if err := decode(raw, &decl); err != nil {
		return e.fail("template %s: inputs: %w", name, err)
	}
	inputs := map[string]string{}
	for _, p := range decl.Inputs.Parameters {
		switch v, ok := args[p.Name]; {
		case ok:
			inputs[p.Name] = v
		case p.Value != nil:
			inputs[p.Name] = string(*p.Value)
		case p.Default != nil:
			inputs[p.Name] = string(*p.Default)
		}
	}
	tree := substituteTree(raw, e.templateScope(inputs))
	sanitizeQuantities(tree, func(field, value string) {
		e.assume(true, "%s: %s is %q, not known before the run; counted as 0", path, field, value)
	})
	var t template
	if err := decode(tree, &t); err != nil {
		return e.fail("template %s: %w", name, err)
	}
	switch {
	case t.DAG != nil:
		return e.dag(&t, path, depth)
	case t.Steps != nil:
		return e.steps(&t, path, depth)
	case t.Container != nil || t.Script != nil || t.ContainerSet != nil || t.Resource != nil || t.Data != nil:
		return e.pod(&t, path)
	}
	// suspend, http and plugin templates run no pod of their own (http and plugin run in
	// Argo's agent pod, which fairway leaves alone).
	return &result{}
}

// node is one call in a DAG or steps group: a task, or one item of a loop.
type node struct {
	res   *result
	count int64
	preds []int
}

// call evaluates a task or step: its loop, its template and its exit hook. It returns one node
// per evaluated copy (loop items evaluated one by one), without predecessors.
func (e *evaluator) call(tk *task, parent *template, path string, outputs map[string]map[string]string, depth int) []node {
	path = path + "/" + tk.Name
	if len(tk.TemplateRef) > 0 || len(tk.Inline) > 0 || tk.Template == "" {
		what := "templateRef"
		if len(tk.Inline) > 0 {
			what = "an inline template"
		}
		e.assume(true, "%s: runs %s, which the profile does not read; not counted", path, what)
		return []node{{res: &result{}, count: 1}}
	}
	items, count, counted := e.loop(tk, parent, path, outputs)
	run := func(item *string) *result {
		scope := taskScope(outputs, item)
		args := map[string]string{}
		for _, p := range tk.Arguments.Parameters {
			if p.Value != nil {
				args[p.Name] = substitute(string(*p.Value), scope)
			}
		}
		res := e.invoke(tk.Template, path, args, depth+1)
		if tk.When != "" {
			for _, i := range res.steps {
				e.prof.Steps[i].Conditional = true
			}
		}
		exit := tk.OnExit
		var exitArgs arguments
		if h, ok := tk.Hooks["exit"]; ok {
			exit, exitArgs = h.Template, h.Arguments
		}
		if exit != "" {
			args := map[string]string{}
			for _, p := range exitArgs.Parameters {
				if p.Value != nil {
					args[p.Name] = substitute(string(*p.Value), scope)
				}
			}
			res = e.sequence(res, e.invoke(exit, path+"/onExit", args, depth+1))
		}
		for name, h := range tk.Hooks {
			if name != "exit" && h.Template != "" {
				// A hook on an expression runs beside the step.
				res = e.parallel([]node{{res: res, count: 1}, {res: e.invoke(h.Template, path+"/hooks/"+name, nil, depth+1), count: 1}}, nil)
			}
		}
		return res
	}
	if items != nil && len(items) <= e.opts.MaxExpandedItems {
		nodes := make([]node, len(items))
		for i := range items {
			nodes[i] = node{res: run(&items[i]), count: 1}
		}
		return nodes
	}
	res := run(nil)
	if !counted {
		return []node{{res: res, count: 1}}
	}
	return []node{{res: res, count: count}}
}

// loop returns a task's items when they are known, and how many iterations to count; counted
// is false for a task without a loop.
func (e *evaluator) loop(tk *task, parent *template, path string, outputs map[string]map[string]string) (items []string, count int64, counted bool) {
	scope := taskScope(outputs, nil)
	switch {
	case tk.WithItems != nil:
		for _, it := range tk.WithItems {
			items = append(items, substitute(scalar(it), scope))
		}
		return items, int64(len(items)), true
	case tk.WithParam != "":
		v := substitute(tk.WithParam, scope)
		var list []any
		if known(v) && json.Unmarshal([]byte(v), &list) == nil {
			for _, it := range list {
				items = append(items, scalar(it))
			}
			return items, int64(len(items)), true
		}
		return nil, e.unknownLoop(parent, path, "withParam "+tk.WithParam), true
	case tk.WithSequence != nil:
		n, ok := sequenceCount(tk.WithSequence, scope)
		if !ok {
			return nil, e.unknownLoop(parent, path, "withSequence"), true
		}
		return nil, n, true
	}
	return nil, 1, false
}

func sequenceCount(s *sequence, scope lookup) (int64, bool) {
	read := func(v *string) (int64, bool) {
		if v == nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(substitute(*v, scope)), 10, 64)
		return n, err == nil && n >= 0
	}
	str := func(p any) *string {
		switch v := p.(type) {
		case nil:
			return nil
		case interface{ String() string }:
			s := v.String()
			return &s
		}
		return nil
	}
	if s.Count != nil {
		return read(str(s.Count))
	}
	start, end := int64(0), int64(0)
	var ok bool
	if s.Start != nil {
		if start, ok = read(str(s.Start)); !ok {
			return 0, false
		}
	}
	if end, ok = read(str(s.End)); !ok {
		return 0, false
	}
	if end < start {
		start, end = end, start
	}
	return end - start + 1, true
}

// unknownLoop is the count of a loop not known before the run: the calling template's
// parallelism when it has one (no more iterations run at once), else Options.UnknownLoopCount,
// an assumption that makes the profile Unbounded.
func (e *evaluator) unknownLoop(parent *template, path, what string) int64 {
	if p, ok := intOf(parent.Parallelism); ok && p > 0 {
		e.assume(false, "%s: %s has no count before the run; template %s runs at most %d at once", path, what, parent.Name, p)
		return p
	}
	e.assume(true, "%s: %s has no count before the run; counted as %d", path, what, e.opts.UnknownLoopCount)
	return e.opts.UnknownLoopCount
}

// dag evaluates a DAG template: tasks run once their dependencies are done, so the most that
// runs at once is the heaviest set of tasks none of which depends on another.
func (e *evaluator) dag(t *template, path string, depth int) *result {
	tasks := t.DAG.Tasks
	index := make(map[string]int, len(tasks))
	for i, tk := range tasks {
		index[tk.Name] = i
	}
	deps := make([][]int, len(tasks))
	for i, tk := range tasks {
		names := slices.Clone(tk.Dependencies)
		for _, m := range dependsName.FindAllStringSubmatch(tk.Depends, -1) {
			names = append(names, m[1])
		}
		for _, n := range names {
			j, ok := index[n]
			if !ok {
				return e.fail("%s/%s: depends on %q, which is not a task of DAG %s", path, tk.Name, n, t.Name)
			}
			if !slices.Contains(deps[i], j) {
				deps[i] = append(deps[i], j)
			}
		}
	}
	order, ok := topoOrder(deps)
	if !ok {
		return e.fail("%s: the tasks of DAG %s depend on each other in a cycle", path, t.Name)
	}
	outputs := map[string]map[string]string{}
	nodesOf := make([][]int, len(tasks))
	var nodes []node
	for _, i := range order {
		tk := &tasks[i]
		var preds []int
		for _, d := range deps[i] {
			preds = append(preds, nodesOf[d]...)
		}
		for _, n := range e.call(tk, t, path, outputs, depth) {
			n.preds = preds
			nodesOf[i] = append(nodesOf[i], len(nodes))
			nodes = append(nodes, n)
		}
		if len(nodesOf[i]) == 1 && nodes[nodesOf[i][0]].count == 1 {
			outputs[tk.Name] = nodes[nodesOf[i][0]].res.outputs
		}
	}
	return e.parallel(nodes, t)
}

// dependsName finds the task names of an Argo depends expression ("a.Succeeded && (b || c)").
var dependsName = regexp.MustCompile(`(?:^|[^\w.-])([\w-]+)(?:\.\w+)?`)

// topoOrder orders nodes after their predecessors; false on a cycle.
func topoOrder(preds [][]int) ([]int, bool) {
	n := len(preds)
	indeg := make([]int, n)
	succ := make([][]int, n)
	for i, ps := range preds {
		indeg[i] = len(ps)
		for _, p := range ps {
			succ[p] = append(succ[p], i)
		}
	}
	var order, ready []int
	for i := range n {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, s := range succ[i] {
			if indeg[s]--; indeg[s] == 0 {
				ready = append(ready, s)
			}
		}
	}
	return order, len(order) == n
}

// steps evaluates a steps template: its groups run one after the other, the steps of a group
// together.
func (e *evaluator) steps(t *template, path string, depth int) *result {
	outputs := map[string]map[string]string{}
	res := &result{}
	for _, group := range t.Steps {
		var nodes []node
		var names []string
		for i := range group {
			for _, n := range e.call(&group[i], t, path, outputs, depth) {
				nodes = append(nodes, n)
				names = append(names, group[i].Name)
			}
		}
		for i, n := range nodes {
			if n.count == 1 && (i == 0 || names[i-1] != names[i]) && (i == len(nodes)-1 || names[i+1] != names[i]) {
				outputs[names[i]] = n.res.outputs
			}
		}
		res = e.sequence(res, e.parallel(nodes, t))
	}
	return res
}

// sequence is a then b.
func (e *evaluator) sequence(a, b *result) *result {
	for _, i := range b.steps {
		e.prof.Steps[i].Stage += a.levels
	}
	out := &result{levels: a.levels + b.levels, steps: append(slices.Clone(a.steps), b.steps...), outputs: b.outputs}
	for d := range numDims {
		out.peak[d] = max(a.peak[d], b.peak[d])
	}
	out.witness = a.witness
	if b.peak[0] > a.peak[0] {
		out.witness = b.witness
	}
	return out
}

// parallel combines nodes that run as their predecessors allow, under the template's
// parallelism (t may be nil: none).
func (e *evaluator) parallel(nodes []node, t *template) *result {
	out := &result{}
	// Stages: a node starts after the longest chain of its predecessors.
	start := make([]int, len(nodes))
	for i, n := range nodes {
		for _, p := range n.preds {
			start[i] = max(start[i], start[p]+nodes[p].res.levels)
		}
		for _, s := range n.res.steps {
			e.prof.Steps[s].Stage += start[i]
			e.prof.Steps[s].Count *= n.count
		}
		out.steps = append(out.steps, n.res.steps...)
		out.levels = max(out.levels, start[i]+n.res.levels)
	}
	preds := make([][]int, len(nodes))
	copies := make([]copyOf, len(nodes))
	for i, n := range nodes {
		preds[i] = n.preds
		copies[i] = copyOf{weights: n.res.peak, count: n.count, witness: n.res.witness}
	}
	limit, limited := int64(0), false
	if t != nil {
		if p, ok := intOf(t.Parallelism); ok && p > 0 {
			limit, limited = p, true
		}
	}
	for d := range numDims {
		w := make([]int64, len(nodes))
		for i, n := range nodes {
			w[i] = n.res.peak[d] * n.count
		}
		best, set := maxAntichain(preds, w)
		var wit []PodCount
		if d == 0 {
			for _, i := range set {
				wit = append(wit, scaled(nodes[i].res.witness, nodes[i].count)...)
			}
		}
		if limited {
			if top, twit := topN(copies, limit, d); top < best {
				best, wit = top, twit
			}
		}
		out.peak[d] = best
		if d == 0 {
			out.witness = wit
		}
	}
	return out
}

// copyOf is a node as copies of one weight, for parallelism caps.
type copyOf struct {
	weights [numDims]int64
	count   int64
	witness []PodCount
}

// topN is the sum of the n heaviest copies in dimension d, and their pods.
func topN(copies []copyOf, n int64, d int) (int64, []PodCount) {
	sorted := slices.Clone(copies)
	slices.SortStableFunc(sorted, func(a, b copyOf) int {
		switch {
		case a.weights[d] > b.weights[d]:
			return -1
		case a.weights[d] < b.weights[d]:
			return 1
		}
		return 0
	})
	var sum int64
	var wit []PodCount
	for _, c := range sorted {
		if n <= 0 {
			break
		}
		k := min(n, c.count)
		sum += c.weights[d] * k
		wit = append(wit, scaled(c.witness, k)...)
		n -= k
	}
	return sum, wit
}

func scaled(w []PodCount, n int64) []PodCount {
	out := make([]PodCount, len(w))
	for i, p := range w {
		out[i] = PodCount{Step: p.Step, Count: p.Count * n}
	}
	return out
}
