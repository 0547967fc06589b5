//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/adapters/jupyterhub"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// TestExampleJupyterHub creates notebook pods exactly as KubeSpawner 7.x builds them from the
// profiles of examples/jupyterhub/values.yaml (examples.RenderNotebook; JupyterHub itself does not
// run here), on one node of four GPUs. Four users pick a quarter of a GPU: the four notebooks
// share one GPU and see its UUID. One picks half a GPU, one a whole GPU. Then a preemptible
// training job of another project asks for four GPUs: it gets the one free GPU, the rest of it
// waits, and no notebook is touched. Every notebook has its home PersistentVolumeClaim, as z2jh's
// default values give it, of the cluster's default class: local-path-provisioner's, which waits
// for the first consumer (as the default classes of EKS, GKE and AKS do), so fairway chooses the
// node and the provisioner makes the volume there before the notebook is bound.
func TestExampleJupyterHub(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "h100", Count: 1, GPUType: "H100", GPUProduct: "NVIDIA-H100-80GB-HBM3", GPUsPerNode: 4,
		GPUMemoryMiB: 81559, CPU: "96", Memory: "1Ti"}
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, LocalPathProvisioner: true}, []client.Object{
		exampleQueue("notebooks", "jhub", "3"), exampleQueue("research", "research", ""),
	}, stack.Options{})
	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	spawn := func(user, profile string) *corev1.Pod {
		t.Helper()
		opts := examples.NotebookOptions{Release: "jhub", Namespace: "jhub", User: user, Profile: profile}
		pod, err := examples.RenderNotebook(values, opts)
		if err != nil {
			t.Fatal(err)
		}
		home, err := examples.RenderHomeClaim(values, opts)
		if err != nil || home == nil {
			t.Fatalf("home claim: %v, %v (z2jh's default is a dynamic home volume)", home, err)
		}
		mustCreate(t, c, home) // KubeSpawner creates the claim, then the pod
		mustCreate(t, c, pod)
		return pod
	}
	sel := map[string]string{jupyterhub.ComponentLabel: jupyterhub.SingleUserComponent}
	running := func(ctx context.Context, names ...string) ([]corev1.Pod, error) {
		var out []corev1.Pod
		for _, n := range names {
			var p corev1.Pod
			if err := c.Client().Get(ctx, client.ObjectKey{Namespace: "jhub", Name: n}, &p); err != nil {
				return nil, err
			}
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
				return nil, fmt.Errorf("%s is %s on %q", n, p.Status.Phase, p.Spec.NodeName)
			}
			out = append(out, p)
		}
		return out, nil
	}

	// Four quarter-GPU notebooks pack onto one GPU.
	var quarters []corev1.Pod
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		spawn(u, "gpu-quarter")
	}
	eventually(t, 60*time.Second, "four quarter-GPU notebooks running", func(ctx context.Context) (bool, error) {
		var err error
		quarters, err = running(ctx, "jupyter-alice", "jupyter-bob", "jupyter-carol", "jupyter-dave")
		return err == nil, err
	})
	uuid := quarters[0].Annotations[fairwayv1.GPUUUIDAnnotation]
	for _, p := range quarters {
		checkPod(t, &p, expectPod{queue: "notebooks", framework: jupyterhub.Name, kind: "notebook", podGroup: "nb-" + p.Name, minMember: 1,
			priorityClass: fairwayv1.PriorityClassInteractive, priority: ptr.To[int32](fairwayv1.NonPreemptiblePriority),
			gpuFraction: "0.25", gpuContainer: jupyterhub.NotebookContainer})
		if got := p.Annotations[fairwayv1.GPUUUIDAnnotation]; got == "" || got != uuid || p.Spec.NodeName != quarters[0].Spec.NodeName {
			t.Errorf("notebook %s on GPU %q of %s; %s on GPU %q", p.Name, got, p.Spec.NodeName, quarters[0].Name, uuid)
		}
	}
	t.Logf("four quarter-GPU notebooks share GPU %s", uuid)
	for _, p := range quarters {
		claimOnNode(t, c, "jhub", "claim-"+strings.TrimPrefix(p.Name, "jupyter-"), p.Spec.NodeName)
	}

	// Half a GPU and a whole GPU.
	spawn("erin", "gpu-half")
	spawn("frank", "gpu-whole")
	var others []corev1.Pod
	eventually(t, 60*time.Second, "the half- and whole-GPU notebooks running", func(ctx context.Context) (bool, error) {
		var err error
		others, err = running(ctx, "jupyter-erin", "jupyter-frank")
		return err == nil, err
	})
	half, whole := others[0], others[1]
	checkPod(t, &half, expectPod{queue: "notebooks", framework: jupyterhub.Name, kind: "notebook", podGroup: "nb-jupyter-erin", minMember: 1,
		priorityClass: fairwayv1.PriorityClassInteractive, priority: ptr.To[int32](fairwayv1.NonPreemptiblePriority),
		gpuFraction: "0.5", gpuContainer: jupyterhub.NotebookContainer})
	if u := half.Annotations[fairwayv1.GPUUUIDAnnotation]; u == "" || u == uuid {
		t.Errorf("the half-GPU notebook is on GPU %q (the quarters' is %s, which is full)", u, uuid)
	}
	checkPod(t, &whole, expectPod{queue: "notebooks", framework: jupyterhub.Name, kind: "notebook", podGroup: "nb-jupyter-frank", minMember: 1,
		priorityClass: fairwayv1.PriorityClassInteractive, priority: ptr.To[int32](fairwayv1.NonPreemptiblePriority)})
	if gpusOf(&whole) != 1 {
		t.Errorf("the whole-GPU notebook asks for %d GPUs", gpusOf(&whole))
	}
	uids := map[string]string{}
	for _, p := range podsIn(t, c, ctx, "jhub", sel) {
		uids[p.Name] = string(p.UID)
	}

	// A preemptible training job of another project wants four GPUs: it gets the free one; the
	// rest waits, and the notebooks stay.
	job := exampleObject(t, "research", "queues", "training-job.yaml")
	for _, f := range [][]string{{"spec", "parallelism"}, {"spec", "completions"}} {
		if err := unstructuredSet(job, int64(4), f...); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructuredSet(job, "1h", "spec", "template", "metadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, job)
	train := map[string]string{"app": "bert-finetune"}
	eventually(t, 30*time.Second, "one training pod bound, three waiting with a reason", func(ctx context.Context) (bool, error) {
		pods := podsIn(t, c, ctx, "research", train)
		waiting := pendingPods(pods)
		for _, p := range waiting {
			if reasonOf(&p) == "" {
				return false, fmt.Errorf("%s waits without a reason", p.Name)
			}
		}
		return len(bound(pods)) == 1 && len(waiting) == 3, fmt.Errorf("%d bound, %d waiting", len(bound(pods)), len(waiting))
	})
	waiting := pendingPods(podsIn(t, c, ctx, "research", train))
	t.Logf("training pod waits: %s", reasonOf(&waiting[0]))
	nbs := podsIn(t, c, ctx, "jhub", sel)
	if len(nbs) != 6 {
		t.Errorf("want 6 notebooks, got %s", describePods(nbs))
	}
	for _, p := range nbs {
		if why := disrupted(&p); why != "" || string(p.UID) != uids[p.Name] || p.Status.Phase != corev1.PodRunning {
			t.Errorf("notebook %s was disturbed: %s, %s, uid %s (was %s)", p.Name, why, p.Status.Phase, p.UID, uids[p.Name])
		}
	}
	for _, reason := range []string{"Preempt", "Reclaim", "Consolidate"} {
		if notes := eventsFor(t, c, ctx, "jhub", reason); len(notes) != 0 {
			t.Errorf("%s events on notebooks: %v", reason, notes)
		}
	}
}
