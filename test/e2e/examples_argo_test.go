//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/argo"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// trainNode matches the Argo node names of the train step's attempts: <wf>[1].train(<attempt>).
var trainNode = regexp.MustCompile(`\[1\]\.train\((\d+)\)$`)

// TestExampleArgo runs examples/argo/workflow.yaml through the real workflow-controller on one
// node with one GPU. Project ml-team has no guarantee, so its train step runs on a borrowed GPU;
// while it runs, project prod, whose guarantee is that GPU, asks for it. fairway reclaims it: the
// running train pod is deleted, which Argo records as an Error ("pod deleted"). The example's
// retryStrategy (retryPolicy Always) retries the step; the retry waits until prod's pod is done,
// then runs, evaluate gets half the GPU, and the workflow Succeeds.
func TestExampleArgo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 1,
		GPUMemoryMiB: 81559, CPU: "64", Memory: "512Gi"}
	c := startExample(t, []cluster.NodePool{gpu}, []client.Object{
		exampleQueue("ml-team", "ml-team", ""), exampleQueue("prod", "prod", "1"),
	}, stack.Options{})
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}

	wf := exampleObject(t, "ml-team", "argo", "workflow.yaml")
	// kwok finishes each step a second after it starts, train after 20 s: long enough to be
	// reclaimed while it runs.
	kwokCompletes(t, wf, time.Second, map[string]time.Duration{"train": 20 * time.Second})
	mustCreate(t, c, wf)
	name := wf.GetName()
	t.Logf("workflow %s submitted", name)
	sel := map[string]string{argo.WorkflowLabel: name}
	attempt := func(p *corev1.Pod) string {
		if m := trainNode.FindStringSubmatch(p.Annotations["workflows.argoproj.io/node-name"]); m != nil {
			return m[1]
		}
		return ""
	}

	// The first attempt of train runs on ml-team's borrowed GPU. Argo re-creates a step's pod
	// that goes missing within 10 s of the step's start (RECENTLY_STARTED_POD_DURATION), as the
	// same attempt; retryStrategy is for the pod of a step that ran longer, which is what a
	// reclaim usually hits. So the test waits for that.
	var first corev1.Pod
	eventually(t, 60*time.Second, "train's first attempt running for 11 s", func(ctx context.Context) (bool, error) {
		if err := c.Client().Get(ctx, client.ObjectKeyFromObject(wf), wf); err != nil {
			return false, err
		}
		n := workflowNodeStatus(wf)["train(0)"]
		if n.phase != "Running" || n.startedAt.IsZero() || time.Since(n.startedAt) < 11*time.Second {
			return false, fmt.Errorf("node train(0) is %q since %v", n.phase, n.startedAt)
		}
		for _, p := range podsIn(t, c, ctx, "ml-team", sel) {
			if attempt(&p) == "0" && p.Status.Phase == corev1.PodRunning {
				first = p
				return true, nil
			}
		}
		return false, nil
	})
	if gpusOf(&first) != 1 || first.Labels[fairwayv1.QueueLabel] != "ml-team" || first.Spec.PriorityClassName != fairwayv1.PriorityClassTraining {
		t.Errorf("train pod %s: %d GPUs, queue %q, class %q", first.Name, gpusOf(&first), first.Labels[fairwayv1.QueueLabel], first.Spec.PriorityClassName)
	}

	// prod claims its guaranteed GPU; its job is done 8 s later.
	claim := plainPod("serve-model")
	claim.Namespace = "prod"
	claim.Annotations = map[string]string{cluster.CompleteDelayAnnotation: "8s"}
	claim.Spec.Containers[0].Resources.Limits = corev1.ResourceList{fairwayv1.ResourceGPU: resource.MustParse("1")}
	mustCreate(t, c, claim)
	begin := time.Now()
	eventually(t, 30*time.Second, "prod's pod bound on the reclaimed GPU", func(ctx context.Context) (bool, error) {
		return len(bound(podsIn(t, c, ctx, "prod", nil))) == 1, nil
	})
	t.Logf("prod's pod bound %v after asking", time.Since(begin).Round(time.Millisecond))
	// Events are written asynchronously (client-go's broadcaster): the claimant can bind before
	// the victim's event is stored, so wait for it a while rather than read once.
	notes := eventsAtLeast(t, c, ctx, "ml-team", "Reclaim", 1, 10*time.Second)
	if len(notes) != 1 {
		t.Errorf("want one Reclaim event on the train pod, got %v", notes)
	} else {
		t.Logf("victim event: %s", notes[0])
	}

	// Argo records the deleted attempt as an Error and retries; the workflow succeeds.
	phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone)
	pods := podsIn(t, c, ctx, "ml-team", sel)
	if phase != "Succeeded" {
		t.Fatalf("workflow ended %s; pods: %s; nodes: %s", phase, describePods(pods), workflowNodes(wf))
	}
	nodes := workflowNodeStatus(wf)
	if n, ok := nodes["train(0)"]; !ok || n.phase != "Error" || n.message != "pod deleted" {
		t.Errorf("train(0) ended %+v, want Error \"pod deleted\"; nodes: %s", n, workflowNodes(wf))
	}
	if n := nodes["train(1)"]; n.phase != "Succeeded" {
		t.Errorf("train(1) ended %+v; nodes: %s", n, workflowNodes(wf))
	}
	for _, p := range pods {
		switch {
		case attempt(&p) == "1":
			if p.Status.Phase != corev1.PodSucceeded || gpusOf(&p) != 1 {
				t.Errorf("train's retry %s: %s, %d GPUs", p.Name, p.Status.Phase, gpusOf(&p))
			}
		case p.Annotations["workflows.argoproj.io/node-name"] == name+"[2].evaluate(0)":
			if p.Annotations[fairwayv1.GPUFractionAnnotation] != "0.5" || p.Annotations[fairwayv1.GPUUUIDAnnotation] == "" ||
				p.Annotations[fairwayv1.GPUContainerAnnotation] != argo.MainContainer {
				t.Errorf("evaluate %s: fraction %q on %q, GPU %q", p.Name, p.Annotations[fairwayv1.GPUFractionAnnotation],
					p.Annotations[fairwayv1.GPUContainerAnnotation], p.Annotations[fairwayv1.GPUUUIDAnnotation])
			}
		}
	}
	t.Logf("workflow %s Succeeded after a reclaimed train step: %s", name, workflowNodes(wf))
}

type argoNode struct {
	phase, message string
	startedAt      time.Time
}

// workflowNodeStatus maps the display names of a workflow's nodes to their phase and message.
func workflowNodeStatus(wf *unstructured.Unstructured) map[string]argoNode {
	nodes, _, _ := unstructured.NestedMap(wf.Object, "status", "nodes")
	out := map[string]argoNode{}
	for _, n := range nodes {
		m := n.(map[string]any)
		n := argoNode{phase: fmt.Sprint(m["phase"]), message: fmt.Sprint(m["message"])}
		if s, ok := m["startedAt"].(string); ok {
			n.startedAt, _ = time.Parse(time.RFC3339, s)
		}
		out[fmt.Sprint(m["displayName"])] = n
	}
	return out
}

// workflowNodes lists a workflow's nodes as name=phase("message"), for messages.
func workflowNodes(wf *unstructured.Unstructured) string {
	var out []string
	for name, n := range workflowNodeStatus(wf) {
		s := name + "=" + n.phase
		if n.message != "<nil>" && n.message != "" {
			s += fmt.Sprintf("(%q)", n.message)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
