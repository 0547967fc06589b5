// Package story is the product story `make demo` plays on a local cluster: fairway installed
// from its Helm chart, the real Argo workflow-controller and KubeRay operator, and four acts of
// a day on four 8-GPU H100 nodes: notebooks share GPUs and team B borrows the idle ones; team A
// claims its guarantee and team B is reclaimed; at night one 32-GPU gang gets all four nodes; in
// the morning an inference burst takes GPUs back from the night training.
//
// Each act applies manifests (manifests/*.yaml, the YAML a user would write) and waits for the
// outcomes it expects, with a timeout. With Options.Check the story is a test: Play returns an
// error at the first outcome not observed in time; `make demo-check` and the e2e test TestDemo
// run it so. Otherwise a live view (view.go) shows the queues, who holds which GPU, and what
// fairway did.
package story

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/stack"
)

// Options configure Setup and Play.
type Options struct {
	// Check plays the story as a test: no pauses, a line per outcome, and an error for the first
	// outcome not observed in time.
	Check bool
	// Live redraws a terminal view every second (Out must be a terminal); otherwise the story
	// prints plain lines.
	Live bool
	// Width and Height of the terminal for the live view; 100×40 when zero.
	Width, Height int
	// Pace is how long each act's outcome stays on screen before the next act begins (not in
	// check mode).
	Pace time.Duration
	// Next, when set, replaces Pace: the next act begins when a value arrives (the demo's step
	// mode sends one per Enter).
	Next <-chan struct{}
	// Out receives the view or the lines.
	Out io.Writer
	// Binary is the fairway binary; fairwayproc.Build's choice when empty.
	Binary string
	// Log receives the components' progress (cluster, agents).
	Log logr.Logger
}

// Env is the running demo: the cluster, fairway and the operators.
type Env struct {
	C     *cluster.Cluster
	Stack *stack.Stack
	opts  Options
	start time.Time

	mu        sync.Mutex
	narration narration
	viewing   bool // the live view owns the terminal

	// slots are the grid's columns of each whole-GPU pod, kept from frame to frame (gpuRows).
	slotsMu sync.Mutex
	slots   map[string][]int
}

// narration is what the view shows of the story: the act, its actions, its outcomes.
type narration struct {
	act, acts int
	title     string
	caption   string
	actions   []string
	outcomes  []Outcome
	// prompt asks for Enter in step mode.
	prompt string
	done   bool
}

// Setup installs fairway into c from the chart, starts the Argo workflow-controller and the
// KubeRay operator, creates the story's queues, and starts fairway's components (gpu-agents,
// scheduler, webhook) as local processes under the chart's ServiceAccounts.
func Setup(ctx context.Context, c *cluster.Cluster, o Options) (*Env, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	e := &Env{C: c, opts: o, start: time.Now()}
	e.say("Installing fairway from charts/fairway (helm template, then applied to the API server)...")
	r, err := chart.Template(ctx, chart.Local())
	if err != nil {
		return nil, err
	}
	in, err := chart.Install(ctx, c, r, chart.Namespace)
	if err != nil {
		return nil, err
	}
	e.say("  %s: CRDs, PriorityClasses, ServiceAccounts and RBAC, Services, dashboards.", count(len(in.Applied), "object", "objects"))
	e.say("  %s", workloadsLine(in.DryRun))

	e.say("Starting the Argo workflow-controller and the KubeRay operator...")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Go(func() { _, errs[0] = c.StartArgo(ctx, cluster.ArgoOptions{}) })
	wg.Go(func() { _, errs[1] = c.StartKubeRay(ctx, cluster.KubeRayOptions{}) })
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	e.say("Creating the queues (%s)...", manifestPath(queuesManifest))
	if err := e.apply(ctx, queuesManifest, nil); err != nil {
		return nil, err
	}
	for _, ns := range []string{"notebooks", "team-a", "team-b"} {
		if err := fairwayproc.WaitServiceAccount(ctx, c, ns); err != nil {
			return nil, err
		}
	}
	e.say("Starting fairway: a gpu-agent per node, the scheduler, the webhook...")
	if e.Stack, err = stack.Start(ctx, c, stack.Options{
		Binary: o.Binary, RunAs: chart.ServiceAccounts(chart.Namespace), ProbeNamespace: "team-a", Log: o.Log,
	}); err != nil {
		return nil, err
	}
	e.say("Ready in %v.\n", time.Since(e.start).Round(100*time.Millisecond))
	return e, nil
}

// Stop stops fairway's components (the cluster stops the rest).
func (e *Env) Stop() {
	if e.Stack != nil {
		e.Stack.Stop()
	}
}

// Outcome is one expected outcome of an act, and what was seen of it.
type Outcome struct {
	What string
	// Seen is what was last observed: the evidence when OK, the state when not.
	Seen string
	OK   bool
	// After is how long after the act began the outcome was observed.
	After time.Duration
}

// Result is one act as it was played.
type Result struct {
	Act      string
	Took     time.Duration
	Outcomes []Outcome
}

// OK reports whether every outcome of the act was observed.
func (r Result) OK() bool {
	for _, o := range r.Outcomes {
		if !o.OK {
			return false
		}
	}
	return len(r.Outcomes) > 0
}

// Play plays the acts in order. It returns the results so far and an error when ctx ends or, in
// check mode, when an outcome is not observed in time.
func Play(ctx context.Context, e *Env) ([]Result, error) {
	o := e.opts
	var stopView func()
	if o.Live {
		stopView = e.liveView(ctx)
		defer stopView()
	}
	var results []Result
	for i, a := range acts {
		res, err := e.play(ctx, i, a)
		results = append(results, res)
		if err != nil {
			return results, err
		}
		if o.Check || i == len(acts)-1 {
			continue
		}
		if err := e.pause(ctx, acts[i+1], i+2); err != nil {
			return results, err
		}
	}
	e.mu.Lock()
	e.narration.done = true
	e.mu.Unlock()
	return results, nil
}

// pause keeps an act's outcome on screen before act number n (next): Pace long, or, in step
// mode, until Enter.
func (e *Env) pause(ctx context.Context, next act, n int) error {
	var wait <-chan time.Time
	switch {
	case e.opts.Next != nil:
		prompt := fmt.Sprintf("Press Enter for act %d/%d: %s", n, len(acts), next.title)
		e.mu.Lock()
		e.narration.prompt = prompt
		e.mu.Unlock()
		e.say("%s", prompt)
	case e.opts.Pace > 0:
		wait = time.After(e.opts.Pace)
	default:
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-wait:
	case <-e.opts.Next:
	}
	return nil
}

// play runs one act: its actions, then a wait for each outcome.
func (e *Env) play(ctx context.Context, i int, a act) (Result, error) {
	begin := time.Now()
	e.mu.Lock()
	e.narration = narration{act: i + 1, acts: len(acts), title: a.title, caption: a.caption}
	e.mu.Unlock()
	e.say("Act %d/%d · %s", i+1, len(acts), a.title)
	e.say("%s", indent(a.caption, "  "))
	res := Result{Act: a.title}
	for _, do := range a.actions {
		line, err := do(ctx, e)
		if err != nil {
			return res, fmt.Errorf("act %d (%s): %w", i+1, a.title, err)
		}
		e.mu.Lock()
		e.narration.actions = append(e.narration.actions, line)
		e.mu.Unlock()
		e.say("  $ %s", line)
	}
	acted := begin // outcomes are timed from the start of the act
	for _, x := range a.expect {
		out := Outcome{What: x.what}
		e.setOutcome(out, true)
		deadline := time.Now().Add(x.timeout)
		for {
			ok, seen, err := x.check(ctx, e)
			if err != nil && ctx.Err() == nil {
				seen = "error: " + err.Error()
			}
			out.Seen, out.OK = seen, ok && err == nil
			if out.OK {
				out.After = time.Since(acted)
			}
			e.setOutcome(out, false)
			if out.OK {
				break
			}
			if ctx.Err() != nil {
				res.Outcomes = append(res.Outcomes, out)
				res.Took = time.Since(begin)
				return res, ctx.Err()
			}
			if time.Now().After(deadline) {
				res.Outcomes = append(res.Outcomes, out)
				res.Took = time.Since(begin)
				e.say("  ✗ %s: not observed within %v; last seen: %s", x.what, x.timeout, seen)
				if e.opts.Check {
					return res, fmt.Errorf("act %d (%s): %s: not observed within %v; last seen: %s", i+1, a.title, x.what, x.timeout, seen)
				}
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
		}
		res.Outcomes = append(res.Outcomes, out)
		if out.OK {
			e.say("  ✓ %s (%.1fs): %s", x.what, out.After.Seconds(), out.Seen)
		}
	}
	res.Took = time.Since(begin)
	if !e.opts.Live && !e.opts.Check {
		// Without a live view, show the state the act ended in.
		if s, err := e.snapshot(ctx); err == nil {
			e.say("%s", indent(strings.TrimRight(renderState(s, 100, false), "\n"), "  "))
		}
	}
	return res, nil
}

// setOutcome records an outcome for the view: appended when fresh, else updated in place.
func (e *Env) setOutcome(o Outcome, fresh bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := &e.narration
	if fresh || len(n.outcomes) == 0 {
		n.outcomes = append(n.outcomes, o)
		return
	}
	n.outcomes[len(n.outcomes)-1] = o
}

// say prints a line of the story unless the live view owns the terminal.
// workloadsLine says what became of the chart's workloads, each named: the count used to come
// with a list of three for four of them (the webhook's clean-up Job was left out).
func workloadsLine(objs []*unstructured.Unstructured) string {
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = o.GetKind() + " " + o.GetName()
	}
	return fmt.Sprintf("The chart's %s (%s) %s only admitted (server-side dry run): the scheduler, the webhook and the gpu-agents run here as processes under the chart's ServiceAccounts.",
		count(len(objs), "workload", "workloads"), strings.Join(names, ", "), verb(len(objs), "is", "are"))
}

// count is n with its noun: "1 pod", "4 pods", never "1 pods".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// verb is one for a count of 1, else many.
func verb(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func (e *Env) say(format string, args ...any) {
	e.mu.Lock()
	viewing := e.viewing
	e.mu.Unlock()
	if viewing {
		return
	}
	fmt.Fprintf(e.opts.Out, format+"\n", args...)
}

// Summary is one line per act: its name, PASS or FAIL, its time, and what was observed.
func Summary(results []Result) string {
	var b strings.Builder
	for i, r := range results {
		verdict := "PASS"
		if !r.OK() {
			verdict = "FAIL"
		}
		var seen []string
		for _, o := range r.Outcomes {
			s := fmt.Sprintf("%s %.1fs", o.What, o.After.Seconds())
			if !o.OK {
				s = o.What + ": NOT OBSERVED"
			}
			seen = append(seen, s)
		}
		fmt.Fprintf(&b, "act %d %s %5.1fs  %s | %s\n", i+1, verdict, r.Took.Seconds(), r.Act, strings.Join(seen, "; "))
	}
	return b.String()
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

// gpuAmount is an amount of GPUs in words: "0.5 GPU", "1 GPU", "20 GPUs".
func gpuAmount(v float64) string {
	if v > 0 && v <= 1 {
		return fmt.Sprintf("%g GPU", v)
	}
	return fmt.Sprintf("%g GPUs", v)
}
