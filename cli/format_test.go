package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/google/go-cmp/cmp"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

func TestFormatAmount(t *testing.T) {
	for _, tc := range []struct {
		res  string
		in   string
		want string
	}{
		{"gpu", "2500m", "2.5"}, {"gpu", "0.333", "0.333"}, {"gpu", "8", "8"}, {"cpu", "250m", "0.25"},
		{"memory", "64Gi", "64Gi"}, {"memory", "1536Mi", "1.5Gi"}, {"memory", "512Mi", "512Mi"}, {"memory", "2Ti", "2Ti"},
		{"memory", "0", "0"}, {"memory", "1000", "1000"}, {"gpu/H100", "0.0004", "0"},
	} {
		if got := formatAmount(tc.res, amountOf(resource.MustParse(tc.in))); got != tc.want {
			t.Errorf("formatAmount(%s, %s) = %s, want %s", tc.res, tc.in, got, tc.want)
		}
	}
}

func TestGPUSummary(t *testing.T) {
	pod := func(whole string, ann map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: ann}, Spec: corev1.PodSpec{Containers: []corev1.Container{{}}}}
		if whole != "" {
			p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse(whole)}
		}
		return p
	}
	frac := map[string]string{fairwayv1.GPUFractionAnnotation: "0.25"}
	mem := map[string]string{fairwayv1.GPUMemoryAnnotation: "20000"}
	for name, tc := range map[string]struct {
		pods  []*corev1.Pod
		want  string
		total float64
	}{
		"none":   {[]*corev1.Pod{pod("", nil)}, "-", 0},
		"whole":  {[]*corev1.Pod{pod("4", nil), pod("4", nil)}, "8", 8},
		"shares": {[]*corev1.Pod{pod("", frac), pod("", frac), pod("", frac)}, "3×0.25", 0.75},
		"mixed":  {[]*corev1.Pod{pod("2", nil), pod("", frac), pod("", mem)}, "2+1×0.25+1×20000MiB", 2.25},
		"junk":   {[]*corev1.Pod{pod("", map[string]string{fairwayv1.GPUFractionAnnotation: "1.5"})}, "-", 0},
	} {
		got, total := gpuSummary(tc.pods)
		if got != tc.want || total != tc.total {
			t.Errorf("%s: gpuSummary = %q, %v; want %q, %v", name, got, total, tc.want, tc.total)
		}
	}
}

func TestTableAlignsAndFillsEmptyCells(t *testing.T) {
	var b bytes.Buffer
	tb := newTable(&b, "NAME", "QUEUE", "GPUS")
	tb.row("a-long-name", "", "8")
	tb.row("b", "team", "0.5")
	if err := tb.flush(); err != nil {
		t.Fatal(err)
	}
	want := "NAME          QUEUE   GPUS\na-long-name   -       8\nb             team    0.5\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestPodReason(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: "Unschedulable", Message: "NoNodeFits: 0/3 nodes have 8 free GPUs"}}}}
	if code, msg := podReason(p); code != "NoNodeFits" || msg != "0/3 nodes have 8 free GPUs" {
		t.Errorf("got %q %q", code, msg)
	}
	p.Status.Conditions[0].Message = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
	if code, _ := podReason(p); code != "Unschedulable" {
		t.Errorf("kube-scheduler's messages keep the condition's reason; got %q", code)
	}
}

// The hints follow the scheduler's published set of reason codes: a new code needs a hint, and a
// hint of a code the scheduler no longer gives must go.
func TestEveryReasonHasAHint(t *testing.T) {
	for _, code := range fairwayv1.UnschedulableReasons() {
		if hints[code] == "" {
			t.Errorf("no hint for reason %s (cli/hints.go)", code)
		}
	}
	for code := range hints {
		if !code.Known() {
			t.Errorf("hint for %s, which is not a reason the scheduler gives (fairwayv1.UnschedulableReasons)", code)
		}
	}
}

// A queue that sets no quota for a GPU type has no fair share or borrowing of its own on that
// type: its use counts against its gpu quota. The table must not print 0 there, which would
// read as "allocated above fair share", reclaimable.
func TestQueuesGPUTypeWithoutTypeQuota(t *testing.T) {
	twelve := resource.MustParse("12")
	qs := []fairwayv1.Queue{
		{ObjectMeta: metav1.ObjectMeta{Name: "nlp"}, Status: fairwayv1.QueueStatus{
			Allocated: corev1.ResourceList{"gpu": twelve, "gpu/H100": twelve}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "vision"}, Spec: fairwayv1.QueueSpec{
			GPUTypes: []fairwayv1.GPUTypeQuota{{Name: "H100", Quota: &twelve}}}},
	}
	v := BuildQueues(qs, []string{"gpu/H100"})
	var buf bytes.Buffer
	if err := PrintQueues(&buf, v); err != nil {
		t.Fatal(err)
	}
	want := "QUEUE    GPU/H100 GUARANTEED   GPU/H100 FAIR SHARE   GPU/H100 ALLOCATED   GPU/H100 BORROWED   GPU/H100 PENDING   PENDING PODS\n" +
		"nlp      -                     -                     12                   -                   0                  0\n" +
		"vision   12                    0                     0                    0                   0                  0\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if !v.Items[0].Resources["gpu/H100"].NoTypeQuota || v.Items[1].Resources["gpu/H100"].NoTypeQuota {
		t.Errorf("NoTypeQuota: nlp %v, vision %v", v.Items[0].Resources["gpu/H100"].NoTypeQuota, v.Items[1].Resources["gpu/H100"].NoTypeQuota)
	}
}

// With usage history (fair share over time), the table adds RECENT USE per base resource: the
// decayed resource-hours, the fraction of the cluster they are and the part above the guarantee.
func TestQueuesRecentUse(t *testing.T) {
	q := fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "nlp"}, Status: fairwayv1.QueueStatus{
		Allocated: corev1.ResourceList{"gpu": resource.MustParse("8")},
		Usage: &fairwayv1.QueueUsage{HalfLife: metav1.Duration{Duration: 24 * time.Hour},
			Used: corev1.ResourceList{"gpu": resource.MustParse("36.5")}, OverQuota: corev1.ResourceList{"gpu": resource.MustParse("14.6")},
			Capacity: corev1.ResourceList{"gpu": resource.MustParse("146")}},
	}}
	other := fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: "vision"}}
	v := BuildQueues([]fairwayv1.Queue{q, other}, []string{"gpu"})
	var buf bytes.Buffer
	if err := PrintQueues(&buf, v); err != nil {
		t.Fatal(err)
	}
	want := "QUEUE    GPU GUARANTEED   GPU FAIR SHARE   GPU ALLOCATED   GPU BORROWED   GPU PENDING   GPU RECENT USE                PENDING PODS\n" +
		"nlp      0                0                8               0              0             36.5h (25%, 10% over quota)   0\n" +
		"vision   0                0                0               0              0             -                             0\n"
	if diff := cmp.Diff(want, buf.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	if got := v.Items[0].UsageHalfLife; got != "24h0m0s" {
		t.Errorf("usageHalfLife %q", got)
	}
}

// TestCompareNamespaced checks the allocation-free comparison against the joined strings it
// stands for, on namespaces that begin one another ("a" and "a-b": "-" sorts before "/").
func TestCompareNamespaced(t *testing.T) {
	parts := []string{"", "a", "a-b", "ab", "a0", "b", "a/b", "team-a", "team-a-x", "team"}
	for _, ns1 := range parts {
		for _, n1 := range parts {
			for _, ns2 := range parts {
				for _, n2 := range parts {
					want := strings.Compare(ns1+"/"+n1, ns2+"/"+n2)
					if got := compareNamespaced(ns1, n1, ns2, n2); got != want {
						t.Errorf("compareNamespaced(%q, %q, %q, %q) = %d, want %d", ns1, n1, ns2, n2, got, want)
					}
				}
			}
		}
	}
}
