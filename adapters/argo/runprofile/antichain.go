package runprofile

import "math"

// inf stands for "no bound" on arcs; it is far above any sum of demands (whole clusters of
// memory in bytes are below 2^60).
const inf = math.MaxInt64 / 4

// maxAntichain returns the largest total weight of a set of nodes of a DAG no two of which are
// ordered (neither reaches the other), and that set: the most that can run at once when every
// node may take any time. preds[i] are the nodes i starts after; weights are non-negative.
//
// It is a minimum flow with lower bounds (the weighted form of Dilworth's theorem): every node
// must carry at least its weight on its own arc, flow runs from the roots to the leaves along
// the DAG's arcs, and the least total that covers every node equals the heaviest antichain.
// The minimum is found as a feasible flow (each node's weight on a path of its own) reduced by a
// maximum flow run backwards; the nodes whose arcs cross the final cut are the antichain. No
// library in fairway's dependencies offers maximum flow (gonum's graph/flow has dominators
// only), and the graphs are a workflow's tasks, tens of nodes.
func maxAntichain(preds [][]int, weights []int64) (int64, []int) {
	n := len(weights)
	if n == 0 {
		return 0, nil
	}
	// Vertices: s=0, t=1, in(i)=2+2i, out(i)=3+2i. Arcs of the reduction network: an original
	// arc u->v with flow f and lower bound l gives v->u with capacity f-l (flow that can be
	// taken back) and u->v with capacity inf (flow that can be added).
	g := newFlowGraph(2 + 2*n)
	const s, t = 0, 1
	in := func(i int) int { return 2 + 2*i }
	out := func(i int) int { return 3 + 2*i }
	var total int64
	for i, w := range weights {
		total += w
		// s->in(i), flow w, lower bound 0.
		g.addArc(s, in(i), inf)
		g.addArc(in(i), s, w)
		// in(i)->out(i), flow w, lower bound w: nothing to take back.
		g.addArc(in(i), out(i), inf)
		// out(i)->t, flow w, lower bound 0.
		g.addArc(out(i), t, inf)
		g.addArc(t, out(i), w)
		for _, p := range preds[i] {
			g.addArc(out(p), in(i), inf) // flow 0
		}
	}
	reduced := g.maxFlow(t, s)
	reach := g.reachable(t)
	var set []int
	for i := range weights {
		if !reach[in(i)] && reach[out(i)] {
			set = append(set, i)
		}
	}
	return total - reduced, set
}

// flowGraph is a residual network in adjacency lists, for Edmonds-Karp.
type flowGraph struct {
	head []int
	to   []int
	cap  []int64
	next []int
}

func newFlowGraph(n int) *flowGraph {
	g := &flowGraph{head: make([]int, n)}
	for i := range g.head {
		g.head[i] = -1
	}
	return g
}

// addArc adds u->v with capacity c and its residual twin v->u with capacity 0.
func (g *flowGraph) addArc(u, v int, c int64) {
	for _, a := range [2][3]int64{{int64(u), int64(v), c}, {int64(v), int64(u), 0}} {
		g.to = append(g.to, int(a[1]))
		g.cap = append(g.cap, a[2])
		g.next = append(g.next, g.head[a[0]])
		g.head[a[0]] = len(g.to) - 1
	}
}

// maxFlow pushes as much as it can from s to t along shortest augmenting paths.
func (g *flowGraph) maxFlow(s, t int) int64 {
	var flow int64
	prev := make([]int, len(g.head))
	for {
		for i := range prev {
			prev[i] = -1
		}
		prev[s] = -2
		queue := []int{s}
		for len(queue) > 0 && prev[t] == -1 {
			u := queue[0]
			queue = queue[1:]
			for a := g.head[u]; a >= 0; a = g.next[a] {
				if v := g.to[a]; g.cap[a] > 0 && prev[v] == -1 {
					prev[v] = a
					queue = append(queue, v)
				}
			}
		}
		if prev[t] == -1 {
			return flow
		}
		push := int64(inf)
		for v := t; v != s; v = g.to[prev[v]^1] {
			push = min(push, g.cap[prev[v]])
		}
		for v := t; v != s; v = g.to[prev[v]^1] {
			g.cap[prev[v]] -= push
			g.cap[prev[v]^1] += push
		}
		flow += push
		if flow >= inf {
			return flow
		}
	}
}

// reachable marks the vertices s reaches through arcs with capacity left.
func (g *flowGraph) reachable(s int) []bool {
	seen := make([]bool, len(g.head))
	seen[s] = true
	stack := []int{s}
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for a := g.head[u]; a >= 0; a = g.next[a] {
			if v := g.to[a]; g.cap[a] > 0 && !seen[v] {
				seen[v] = true
				stack = append(stack, v)
			}
		}
	}
	return seen
}
