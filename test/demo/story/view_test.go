package story

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/cli"
)

func node(name string) corev1.Node {
	inv := `{"gpus":[`
	for i := range 8 {
		if i > 0 {
			inv += ","
		}
		inv += fmt.Sprintf(`{"index":%d,"uuid":"GPU-%s-%d"}`, i, name, i)
	}
	inv += `]}`
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{fairwayv1.GPUInventoryAnnotation: inv}},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("8")}},
	}
}

func pod(ns, name, nodeName, queue string, labels, annotations map[string]string, gpus int64) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{fairwayv1.QueueLabel: queue}, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: nodeName, SchedulerName: fairwayv1.SchedulerName, Containers: []corev1.Container{{Name: "main"}}},
	}
	for k, v := range labels {
		p.Labels[k] = v
	}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	return p
}

// dayState is the cluster in the middle of act 2: notebooks on a shared GPU, trials, a waiting
// trial and an eviction.
func dayState() *state {
	nodes := []corev1.Node{node("h100-0"), node("h100-1"), node("h100-2"), node("h100-3")}
	var pods []corev1.Pod
	pods = append(pods, pod("fairway-system", "fairway-gpu-h100-0-0", "h100-0", "",
		map[string]string{fairwayv1.ReservationLabel: "true", fairwayv1.GPUGroupLabel: "h100-0-0"},
		map[string]string{fairwayv1.GPUUUIDAnnotation: "GPU-h100-0-5"}, 1))
	for _, u := range users[:4] {
		pods = append(pods, pod("notebooks", "jupyter-"+u, "h100-0", "notebooks",
			map[string]string{"hub.jupyter.org/username": u, fairwayv1.GPUGroupLabel: "h100-0-0"},
			map[string]string{fairwayv1.GPUFractionAnnotation: "0.25"}, 0))
	}
	for i := range 20 {
		pods = append(pods, pod("team-b", fmt.Sprintf("sweep-train-%010d", 1234500+i), fmt.Sprintf("h100-%d", 1+i/8), "team-b",
			map[string]string{workflowLabel: "sweep"}, nil, 1))
	}
	waiting := pod("team-b", "sweep-train-9999999999", "", "team-b", map[string]string{workflowLabel: "sweep"}, nil, 1)
	waiting.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Message: "OverFairShare: 0/4 nodes fit pod team-b/sweep-train-9999999999 (1 GPU, 4 CPU, 16Gi memory): on 4 nodes: not enough free GPUs (1 needed); reclaim: queue team-b would go above its fair share"}}
	pods = append(pods, waiting)
	q := func(name, quota string, alloc, borrowed float64) fairwayv1.Queue {
		v := resource.MustParse(quota)
		return fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: fairwayv1.QueueSpec{Resources: fairwayv1.QueueResources{GPU: &fairwayv1.ResourceQuota{Quota: &v}}},
			Status: fairwayv1.QueueStatus{
				Allocated: corev1.ResourceList{"gpu": resource.MustParse(fmt.Sprint(alloc))},
				Borrowed:  corev1.ResourceList{"gpu": resource.MustParse(fmt.Sprint(borrowed))},
			}}
	}
	return &state{
		elapsed: 83 * time.Second,
		narration: narration{act: 2, acts: 4, title: acts[1].title, caption: acts[1].caption,
			actions:  []string{"kubectl apply -f test/demo/story/manifests/2-team-a.yaml  # RayCluster tune: a head and 16 one-GPU workers, one gang"},
			outcomes: []Outcome{{What: acts[1].expect[0].what, OK: true, After: 4200 * time.Millisecond, Seen: "17 of 17 pods of RayCluster tune running"}, {What: acts[1].expect[1].what, Seen: "3 reclaimed, 21 running, 0 waiting"}}},
		queues:  cli.BuildQueues([]fairwayv1.Queue{q("notebooks", "4", 4, 0), q("team-a", "16", 16, 0), q("team-b", "4", 12, 8)}, []string{"gpu"}),
		nodes:   gpuRows(nodes, pods, nil),
		waiting: waitRows(pods),
		events: []eventRow{{at: time.Date(2026, 1, 1, 9, 30, 0, 0, time.Local), reason: "Reclaim", pod: "team-b/sweep-train-1234567890",
			note: "Reclaimed for gang team-a/ray-tune (ray RayCluster tune) of queue team-a, which is below its guaranteed quota; queue team-b holds 12 GPU, above its guaranteed quota of 4"}},
	}
}

func TestGPURows(t *testing.T) {
	s := dayState()
	n0 := s.nodes[0]
	if got := n0.gpus[5]; len(got.sharers) != 4 || got.share != "0.25" || got.queue != "notebooks" {
		t.Errorf("h100-0 GPU 5 (the reservation's device): %+v", got)
	}
	if got := n0.gpus[0]; got.holder != "" || len(got.sharers) != 0 {
		t.Errorf("h100-0 GPU 0 should be free: %+v", got)
	}
	if got := s.nodes[1].gpus[0]; got.holder != "sweep-500" || got.queue != "team-b" {
		t.Errorf("h100-1 GPU 0: %+v", got)
	}
	if len(s.waiting) != 1 || s.waiting[0].count != 1 || s.waiting[0].reason != "OverFairShare: on 4 nodes: not enough free GPUs (1 needed); reclaim: queue team-b would go above its fair share" {
		t.Errorf("waiting %+v", s.waiting)
	}
}

// TestShortNamesUnique: two trials whose names end alike get names that tell them apart (the
// grid drew two different pods as sweep-163), and the rest keep three characters.
func TestShortNamesUnique(t *testing.T) {
	mk := func(name string) *corev1.Pod {
		p := pod("team-b", name, "h100-1", "team-b", map[string]string{workflowLabel: "sweep"}, nil, 1)
		return &p
	}
	a, b, c, d := mk("sweep-train-1234567163"), mk("sweep-train-9876543163"), mk("sweep-train-1111111500"), mk("sweep-x-163")
	got := shortNames([]*corev1.Pod{a, b, c, d})
	want := map[*corev1.Pod]string{a: "sweep-7163", b: "sweep-3163", c: "sweep-500", d: "sweep-x-163"}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("%s: %q, want %q", p.Name, got[p], w)
		}
	}
}

// TestSlotsStick: a whole-GPU pod keeps its columns when a pod drawn before it leaves, and a
// new pod takes the freed ones.
func TestSlotsStick(t *testing.T) {
	nodes := []corev1.Node{node("h100-0")}
	at := func(p corev1.Pod, sec int) corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 9, 0, sec, 0, time.UTC))
		return p
	}
	a := at(pod("team-a", "a-0", "h100-0", "team-a", nil, nil, 4), 1)
	b := at(pod("team-a", "b-0", "h100-0", "team-a", nil, nil, 2), 2)
	c := at(pod("team-a", "c-0", "h100-0", "team-a", nil, nil, 4), 3)
	slots := map[string][]int{}
	holders := func(rows []nodeRow) string {
		var h []string
		for _, g := range rows[0].gpus {
			h = append(h, g.holder)
		}
		return strings.Join(h, ",")
	}
	if got := holders(gpuRows(nodes, []corev1.Pod{a, b}, slots)); got != "a-0,a-0,a-0,a-0,b-0,b-0,," {
		t.Errorf("first frame: %s", got)
	}
	if got := holders(gpuRows(nodes, []corev1.Pod{b, c}, slots)); got != "c-0,c-0,c-0,c-0,b-0,b-0,," {
		t.Errorf("after a left and c came: %s (b must keep slots 4-5)", got)
	}
	if _, ok := slots["h100-0/team-a/a-0"]; ok {
		t.Error("the slots of a pod that left are kept")
	}
}

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// TestFrameGolden: the demo's frame in the middle of act 2, as a terminal of 100×40 shows it
// (without colours), is testdata/frame-act2.txt; -update rewrites it. The README quotes it.
func TestFrameGolden(t *testing.T) {
	got := renderScreen(dayState(), 100, 40, false)
	golden := filepath.Join("testdata", "frame-act2.txt")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the frame differs from %s; rerun with -update if intended:\n%s", golden, got)
	}
	// The README quotes the frame, with "..." for lines left out: every other line is the golden's.
	readme, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, quote, ok := strings.Cut(string(readme), "A frame of act 2, as the view's test draws it:\n\n```\n")
	quote, _, _ = strings.Cut(quote, "```")
	if !ok || quote == "" {
		t.Fatal("README.md has no frame of act 2")
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(got, "\n") {
		lines[strings.TrimRight(l, " ")] = true
	}
	for _, l := range strings.Split(strings.TrimSuffix(quote, "\n"), "\n") {
		if l != "..." && !lines[strings.TrimRight(l, " ")] {
			t.Errorf("README.md's frame has a line the view does not draw: %q", l)
		}
	}
}

// TestRenderFits checks the live view fits a 100×40 terminal and shows what the story is about.
func TestRenderFits(t *testing.T) {
	screen := renderScreen(dayState(), 100, 40, true)
	lines := strings.Split(strings.TrimRight(screen, "\n"), "\n")
	if len(lines) > 39 {
		t.Errorf("%d lines, want at most 39 in a 40-line terminal", len(lines))
	}
	for i, l := range lines {
		if visible(l) > 100 {
			t.Errorf("line %d is %d columns: %q", i, visible(l), l)
		}
	}
	plain := renderScreen(dayState(), 100, 40, false)
	for _, want := range []string{"act 2/4", "FAIR SHARE", "BORROWED", "team-b", "4×0.25", "alice bob carol dave", "slot 0", slotLegend,
		"sweep-500", "WAITING", "team-b       1 pod, e.g. sweep-train-9999999999:", "OverFairShare: on 4 nodes: not enough free GPUs", "EVICTIONS", "Reclaim", "✓ team A's Ray cluster starts whole", "… 12 trials"} {
		if !strings.Contains(plain, want) {
			t.Errorf("the view lacks %q:\n%s", want, plain)
		}
	}
	t.Logf("\n%s", plain)
}

// TestEventRowsKeepEveryEvictionReason: the view lists the evictions of every reason the API
// owns (a loan's return too), newest first, and no other event.
func TestEventRowsKeepEveryEvictionReason(t *testing.T) {
	at := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	var evs []eventsv1.Event
	for i, r := range fairwayv1.EvictionReasons() {
		evs = append(evs, eventsv1.Event{Reason: string(r), EventTime: metav1.NewMicroTime(at.Add(time.Duration(i) * time.Second)),
			Regarding: corev1.ObjectReference{Namespace: "team-b", Name: fmt.Sprintf("p-%d", i)}})
	}
	evs = append(evs, eventsv1.Event{Reason: "Scheduled", EventTime: metav1.NewMicroTime(at.Add(time.Hour))})
	n := len(fairwayv1.EvictionReasons())
	rows := eventRows(evs, n+1)
	if len(rows) != n {
		t.Fatalf("%d rows, want %d (one per eviction reason): %+v", len(rows), n, rows)
	}
	for i, r := range rows {
		if want := string(fairwayv1.EvictionReasons()[n-1-i]); r.reason != want {
			t.Errorf("row %d: reason %q, want %q (newest first)", i, r.reason, want)
		}
	}
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"a bit too long", 10, "a bit too…"},
		{"\x1b[32mcolored text\x1b[0m", 5, "\x1b[32mcolo…\x1b[0m"},
	} {
		if got := truncate(tc.in, tc.n); got != tc.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}
