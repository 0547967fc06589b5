package story

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

// state is what the view shows, read from the cluster once per redraw.
type state struct {
	elapsed   time.Duration
	narration narration
	queues    cli.QueueList
	nodes     []nodeRow
	waiting   []waitRow
	events    []eventRow
	// kubeconfig is the admin kubeconfig, for the closing hint.
	kubeconfig string
}

// nodeRow is a node and its GPUs, by physical index.
type nodeRow struct {
	name string
	gpus []gpuCell
}

// gpuCell is one GPU: free, held whole by a pod, or shared by fractional pods.
type gpuCell struct {
	holder  string   // the pod's short name, "" when free or shared
	queue   string   // the holder's queue, for its colour
	sharers []string // users or pods sharing the GPU
	share   string   // each sharer's share, "0.25"
}

// waitRow is a queue's waiting pods.
type waitRow struct {
	queue, pod, reason string
	count              int
}

// eventRow is an eviction fairway made.
type eventRow struct {
	at                time.Time
	reason, pod, note string
}

// snapshot reads the state the view shows.
func (e *Env) snapshot(ctx context.Context) (*state, error) {
	s := &state{elapsed: time.Since(e.start), kubeconfig: e.C.Kubeconfig()}
	e.mu.Lock()
	s.narration = e.narration
	s.narration.actions = slices.Clone(e.narration.actions)
	s.narration.outcomes = slices.Clone(e.narration.outcomes)
	e.mu.Unlock()

	cl := e.C.Client()
	var queues fairwayv1.QueueList
	if err := cl.List(ctx, &queues); err != nil {
		return nil, err
	}
	s.queues = cli.BuildQueues(queues.Items, []string{"gpu"})
	var nodes corev1.NodeList
	if err := cl.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := cl.List(ctx, &pods); err != nil {
		return nil, err
	}
	var events eventsv1.EventList
	if err := cl.List(ctx, &events); err != nil {
		return nil, err
	}
	e.slotsMu.Lock()
	if e.slots == nil {
		e.slots = map[string][]int{}
	}
	s.nodes = gpuRows(nodes.Items, pods.Items, e.slots)
	e.slotsMu.Unlock()
	s.waiting = waitRows(pods.Items)
	s.events = eventRows(events.Items, 5)
	return s, nil
}

// gpuRows places every pod on the GPUs it holds. Shared GPUs come from `fairway nodes`
// (cli.BuildNodes): the physical GPU the kubelet gave the reservation, as the gpu-agent reported it,
// and the fractional pods on it. Whole-GPU pods carry no index (the kubelet picks their devices
// and the API does not say which), so they are drawn in slots: the node's other columns. slots
// remembers each pod's columns from one frame to the next ("node/namespace/name"), so that a
// pod keeps its place while others come and go; new pods fill the lowest free columns in order
// of creation. gpuRows updates it; nil draws without memory.
func gpuRows(nodes []corev1.Node, pods []corev1.Pod, slots map[string][]int) []nodeRow {
	byName := map[string]*corev1.Pod{}
	byNode := map[string][]*corev1.Pod{}
	var drawn []*corev1.Pod
	for i := range pods {
		p := &pods[i]
		byName[p.Namespace+"/"+p.Name] = p
		if p.Spec.NodeName != "" && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			byNode[p.Spec.NodeName] = append(byNode[p.Spec.NodeName], p)
			drawn = append(drawn, p)
		}
	}
	names := shortNames(drawn)
	seen := map[string]bool{}
	var rows []nodeRow
	for _, n := range cli.BuildNodes(&cli.NodesSnapshot{Nodes: nodes, Pods: pods}).Items {
		row := nodeRow{name: n.Name, gpus: make([]gpuCell, n.GPUs)}
		taken := make([]bool, n.GPUs)
		cell := func(index *int32) int {
			if i := int(ptr.Deref(index, -1)); i >= 0 && i < len(taken) && !taken[i] {
				return i
			}
			return slices.Index(taken, false)
		}
		for _, g := range n.SharedGPUs {
			i := cell(g.Index)
			if i < 0 {
				continue
			}
			taken[i] = true
			c := &row.gpus[i]
			if len(g.Pods) == 0 {
				c.holder = "reserved" // its last pod just left; the reservation goes next
			}
			for _, sp := range g.Pods {
				if p := byName[sp.Namespace+"/"+sp.Name]; p != nil {
					c.sharers = append(c.sharers, names[p])
					c.queue = p.Labels[fairwayv1.QueueLabel]
				}
				c.share = sp.Share
			}
		}
		type holder struct {
			p     *corev1.Pod
			whole int
			key   string
		}
		var holders []holder
		for _, p := range byNode[n.Name] {
			whole := int64(0)
			for _, c := range p.Spec.Containers {
				q := c.Resources.Limits[fairwayv1.ResourceGPU]
				whole += q.Value()
			}
			if whole > 0 && p.Labels[fairwayv1.ReservationLabel] != "true" {
				holders = append(holders, holder{p: p, whole: int(whole), key: n.Name + "/" + p.Namespace + "/" + p.Name})
			}
		}
		slices.SortFunc(holders, func(a, b holder) int {
			if c := a.p.CreationTimestamp.Compare(b.p.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.key, b.key)
		})
		place := func(h holder, cells []int) {
			for _, i := range cells {
				taken[i] = true
				row.gpus[i] = gpuCell{holder: names[h.p], queue: h.p.Labels[fairwayv1.QueueLabel]}
			}
			seen[h.key] = true
			if slots != nil {
				slots[h.key] = cells
			}
		}
		// Pods drawn before keep their columns while those are free; then the others.
		var fresh []holder
		for _, h := range holders {
			prev := slots[h.key]
			if len(prev) == h.whole && !slices.ContainsFunc(prev, func(i int) bool { return i >= len(taken) || taken[i] }) {
				place(h, prev)
				continue
			}
			fresh = append(fresh, h)
		}
		for _, h := range fresh {
			var cells []int
			for range h.whole {
				i := cell(nil)
				if i < 0 {
					break
				}
				taken[i] = true
				cells = append(cells, i)
			}
			place(h, cells)
		}
		rows = append(rows, row)
	}
	for k := range slots {
		if !seen[k] {
			delete(slots, k)
		}
	}
	return rows
}

// shortNames names each pod in a few characters, uniquely among pods: the notebook's user, or
// the workload (Argo workflow, Ray cluster, app) and the tail of the pod's name, three
// characters long, longer where two pods would otherwise share a name (two trials of a sweep
// whose names end alike), and the whole name where no tail tells them apart.
func shortNames(pods []*corev1.Pod) map[*corev1.Pod]string {
	out := make(map[*corev1.Pod]string, len(pods))
	tails := map[*corev1.Pod]string{}
	for _, p := range pods {
		base := ""
		for _, k := range []string{workflowLabel, rayClusterLabel, "app"} {
			if v := p.Labels[k]; v != "" {
				base = v
				break
			}
		}
		switch u := p.Labels["hub.jupyter.org/username"]; {
		case u != "":
			out[p] = u
		case base == "":
			out[p] = p.Name
		default:
			tails[p] = p.Name[strings.LastIndex(p.Name, "-")+1:]
			out[p] = base + "-" + lastN(tails[p], 3)
		}
	}
	for n := 4; ; n++ {
		count := map[string]int{}
		for _, name := range out {
			count[name]++
		}
		grown := false
		for p, tail := range tails {
			if count[out[p]] < 2 {
				continue
			}
			if n <= len(tail) {
				out[p] = out[p][:strings.LastIndex(out[p], "-")+1] + lastN(tail, n)
				grown = true
			} else {
				out[p] = p.Name
			}
		}
		if !grown {
			return out
		}
	}
}

func lastN(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// waitRows counts fairway's waiting pods per queue, with one pod's reason.
func waitRows(pods []corev1.Pod) []waitRow {
	byQueue := map[string]*waitRow{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName != "" || p.DeletionTimestamp != nil || p.Spec.SchedulerName != fairwayv1.SchedulerName {
			continue
		}
		q := p.Labels[fairwayv1.QueueLabel]
		w := byQueue[q]
		if w == nil {
			w = &waitRow{queue: q}
			byQueue[q] = w
		}
		w.count++
		if r := reason(p); r != "" && w.reason == "" {
			w.pod, w.reason = p.Name, shortReason(r)
		}
	}
	var out []waitRow
	for _, w := range byQueue {
		out = append(out, *w)
	}
	slices.SortFunc(out, func(a, b waitRow) int { return strings.Compare(a.queue, b.queue) })
	return out
}

// podFit is the start of the scheduler's no-room messages (NoNodeFits, OverFairShare) that name the pod
// and its request.
var podFit = regexp.MustCompile(`^(\w+): \d+/\d+ nodes fit pod \S+ \([^)]*\): `)

// shortReason drops from a waiting pod's message what the view shows already (the pod).
func shortReason(msg string) string {
	if m := podFit.FindStringSubmatch(msg); m != nil {
		return m[1] + ": " + msg[len(m[0]):]
	}
	return msg
}

// eventRows keeps the last n evictions, newest first.
func eventRows(events []eventsv1.Event, n int) []eventRow {
	var out []eventRow
	for _, ev := range events {
		// The reasons of fairway's evictions are owned by the API (loan returns included).
		if !slices.Contains(fairwayv1.EvictionReasons(), fairwayv1.EvictionReason(ev.Reason)) {
			continue
		}
		at := ev.EventTime.Time
		if at.IsZero() {
			at = ev.CreationTimestamp.Time
		}
		out = append(out, eventRow{at: at, reason: ev.Reason, pod: ev.Regarding.Namespace + "/" + ev.Regarding.Name, note: ev.Note})
	}
	slices.SortStableFunc(out, func(a, b eventRow) int { return b.at.Compare(a.at) })
	if len(out) > n {
		out = out[:n]
	}
	return out
}

// slotLegend says what the grid's columns are: not device indexes for whole GPUs, which the
// kubelet picks without saying.
const slotLegend = "Slots: shared GPUs at their device index; whole-GPU pods keep theirs (the kubelet picks devices)"

// ANSI colours of the queues in the GPU grid, in order of appearance.
var palette = []string{"36", "32", "33", "35", "34", "31"}

// renderScreen draws the whole live view: the act, its actions and outcomes, then the state.
func renderScreen(s *state, width, height int, color bool) string {
	var b strings.Builder
	n := s.narration
	title := "fairway demo"
	if n.act > 0 {
		title += fmt.Sprintf(" · act %d/%d · %s", n.act, n.acts, n.title)
	}
	clock := fmt.Sprintf("%02d:%02d", int(s.elapsed.Minutes()), int(s.elapsed.Seconds())%60)
	b.WriteString(pad(title, width-len(clock)-1) + " " + clock + "\n")
	b.WriteString(strings.Repeat("─", width) + "\n")
	if n.caption != "" {
		b.WriteString(n.caption + "\n")
	}
	for _, a := range n.actions {
		b.WriteString("  $ " + a + "\n")
	}
	for _, o := range n.outcomes {
		switch {
		case o.OK:
			fmt.Fprintf(&b, "  ✓ %s (%.1fs): %s\n", o.What, o.After.Seconds(), o.Seen)
		default:
			fmt.Fprintf(&b, "  … %s: %s\n", o.What, o.Seen)
		}
	}
	if n.prompt != "" && !n.done {
		b.WriteString(n.prompt + "\n")
	}
	if n.done {
		b.WriteString("The story is over; the cluster keeps running. Ctrl-C stops everything.\n")
		b.WriteString("  export KUBECONFIG=" + s.kubeconfig + "; bin/kubectl-fairway queues\n")
	}
	b.WriteString("\n")
	b.WriteString(renderState(s, width, color))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	for i, l := range lines {
		lines[i] = truncate(l, width)
	}
	if height > 0 && len(lines) > height-1 {
		lines = lines[:height-1]
	}
	return strings.Join(lines, "\n") + "\n"
}

// renderState draws the queues, the GPUs of every node, the waiting pods and the evictions.
func renderState(s *state, width int, color bool) string {
	var b strings.Builder
	b.WriteString(queueTable(s.queues))
	b.WriteString("\n")

	colors := map[string]string{}
	for i, q := range s.queues.Items {
		colors[q.Name] = palette[i%len(palette)]
	}
	paint := func(text, queue string) string {
		if !color {
			return text
		}
		c := colors[queue]
		if queue == "" {
			c = "2"
		}
		return "\x1b[" + c + "m" + text + "\x1b[0m"
	}
	cols := 0
	for _, r := range s.nodes {
		cols = max(cols, len(r.gpus))
	}
	const nameW = 8
	cellW := 11
	if cols > 0 {
		cellW = max(6, min(12, (width-nameW)/cols))
	}
	b.WriteString(pad("NODE", nameW))
	for i := range cols {
		label := "slot " + strconv.Itoa(i)
		if cellW < len(label)+1 {
			label = "s" + strconv.Itoa(i)
		}
		b.WriteString(pad(label, cellW))
	}
	b.WriteString("\n")
	var shared []string
	for _, r := range s.nodes {
		b.WriteString(pad(r.name, nameW))
		for i, g := range r.gpus {
			text := "·"
			switch {
			case len(g.sharers) > 0:
				text = fmt.Sprintf("%d×%s", len(g.sharers), g.share)
				shared = append(shared, fmt.Sprintf("%s/%d: %s", r.name, i, strings.Join(g.sharers, " ")))
			case g.holder != "":
				text = g.holder
			}
			b.WriteString(paint(pad(truncate(text, cellW-1), cellW), g.queue))
		}
		b.WriteString("\n")
	}
	if cols > 0 {
		b.WriteString(truncate(slotLegend, width) + "\n")
	}
	if len(shared) > 0 {
		b.WriteString("SHARED GPUS (pods on each, by node/slot)\n")
		for i := 0; i < len(shared); i += 2 {
			line := "  " + shared[i]
			if i+1 < len(shared) {
				line = pad(line, width/2) + "  " + shared[i+1]
			}
			b.WriteString(truncate(line, width) + "\n")
		}
	}
	if len(s.waiting) > 0 {
		b.WriteString("WAITING\n")
		for _, w := range s.waiting {
			noun := "pods"
			if w.count == 1 {
				noun = "pod"
			}
			line := fmt.Sprintf("  %-10s %3d %s", w.queue, w.count, noun)
			if w.reason != "" {
				line += ", e.g. " + w.pod + ":"
			}
			b.WriteString(truncate(line, width) + "\n")
			if w.reason != "" {
				b.WriteString(truncate("    "+w.reason, width) + "\n")
			}
		}
	}
	if len(s.events) > 0 {
		b.WriteString("EVICTIONS (newest first)\n")
		for _, ev := range s.events {
			b.WriteString(truncate(fmt.Sprintf("  %s %-8s %s: %s", ev.at.Local().Format("15:04:05"), ev.reason, ev.pod, ev.note), width) + "\n")
		}
	}
	return b.String()
}

// queueTable is `fairway queues` (cli.BuildQueues) for GPUs, narrow enough for the view.
func queueTable(v cli.QueueList) string {
	headers := []string{"GUARANTEED", "FAIR SHARE", "ALLOCATED", "BORROWED", "PENDING", "WAITING PODS"}
	name := func(q cli.QueueView) string { return strings.Repeat("  ", q.Depth) + q.Name }
	w := len("QUEUE (GPUs)")
	for _, q := range v.Items {
		w = max(w, len(name(q)))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s", w, "QUEUE (GPUs)")
	for _, h := range headers {
		b.WriteString("  " + h)
	}
	b.WriteString("\n")
	for _, q := range v.Items {
		g := q.Resources["gpu"]
		fmt.Fprintf(&b, "%-*s", w, name(q))
		for i, x := range []string{num(g.Guaranteed), num(g.FairShare), num(g.Allocated), num(g.Borrowed), num(g.Pending), strconv.Itoa(int(q.PendingPods))} {
			fmt.Fprintf(&b, "  %*s", len(headers[i]), x)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func num(a cli.Amount) string { return strconv.FormatFloat(float64(a), 'f', -1, 64) }

// liveView redraws the screen every second until the returned stop is called.
func (e *Env) liveView(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	w, h := e.opts.Width, e.opts.Height
	if w <= 0 {
		w = 100
	}
	if h <= 0 {
		h = 40
	}
	out := e.opts.Out
	e.mu.Lock()
	e.viewing = true
	e.mu.Unlock()
	fmt.Fprint(out, "\x1b[?25l\x1b[2J") // hide the cursor, clear the screen
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			if s, err := e.snapshot(ctx); err == nil {
				draw(out, renderScreen(s, w, h, true))
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		cancel()
		<-done
		fmt.Fprint(out, "\x1b[?25h")
		e.mu.Lock()
		e.viewing = false
		e.mu.Unlock()
	}
}

// Watch keeps the live view up after the story, until ctx ends.
func (e *Env) Watch(ctx context.Context) {
	if !e.opts.Live {
		<-ctx.Done()
		return
	}
	stop := e.liveView(ctx)
	<-ctx.Done()
	stop()
}

// draw repaints the terminal from the top, clearing what each line leaves.
func draw(w io.Writer, screen string) {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for _, l := range strings.Split(strings.TrimRight(screen, "\n"), "\n") {
		b.WriteString(l + "\x1b[K\n")
	}
	b.WriteString("\x1b[J")
	_, _ = io.WriteString(w, b.String())
}

// pad pads s with spaces to n columns.
func pad(s string, n int) string {
	if c := utf8.RuneCountInString(s); c < n {
		return s + strings.Repeat(" ", n-c)
	}
	return s
}

// truncate cuts s to n columns (ANSI colour codes do not count), ending it with "…" when cut.
func truncate(s string, n int) string {
	if visible(s) <= n {
		return s
	}
	var b strings.Builder
	cols := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			j := strings.IndexByte(s[i:], 'm')
			if j < 0 {
				break
			}
			b.WriteString(s[i : i+j+1])
			i += j + 1
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if cols == n-1 {
			b.WriteString("…")
			break
		}
		b.WriteRune(r)
		cols++
		i += size
	}
	if strings.Contains(s, "\x1b[") {
		b.WriteString("\x1b[0m")
	}
	return b.String()
}

// visible counts the columns of s, ANSI colour codes excluded.
func visible(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b {
			j := strings.IndexByte(s[i:], 'm')
			if j < 0 {
				break
			}
			i += j + 1
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		n++
		i += size
	}
	return n
}
