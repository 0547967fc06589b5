//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	volumehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/stack"
)

// claimOnNode checks that a claim is Bound to a volume that lives on node (its required node
// affinity names the node's hostname), and, for a provisioned volume, that fairway asked for it
// there (volume.kubernetes.io/selected-node).
func claimOnNode(t *testing.T, c *cluster.Cluster, namespace, name, node string) {
	t.Helper()
	ctx := t.Context()
	var pvc corev1.PersistentVolumeClaim
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &pvc); err != nil {
		t.Errorf("claim %s/%s: %v", namespace, name, err)
		return
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		t.Errorf("claim %s/%s is %s (volume %q)", namespace, name, pvc.Status.Phase, pvc.Spec.VolumeName)
		return
	}
	var pv corev1.PersistentVolume
	if err := c.Client().Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err != nil {
		t.Errorf("volume %s of claim %s/%s: %v", pvc.Spec.VolumeName, namespace, name, err)
		return
	}
	var n corev1.Node
	if err := c.Client().Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		t.Errorf("node %s: %v", node, err)
		return
	}
	if err := volumehelpers.CheckNodeAffinity(&pv, n.Labels); err != nil || pv.Spec.NodeAffinity == nil {
		t.Errorf("volume %s of claim %s/%s does not live on its pod's node %s: %v (affinity %v)", pv.Name, namespace, name, node, err, pv.Spec.NodeAffinity)
	}
	if sel, ok := pvc.Annotations[volumehelpers.AnnSelectedNode]; pv.Annotations[volumehelpers.AnnDynamicallyProvisioned] != "" && (!ok || sel != node) {
		t.Errorf("provisioned claim %s/%s has selected-node %q, its pod runs on %s", namespace, name, sel, node)
	}
}

func newPVC(namespace, name, class, size string) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
	}}
	if class != "" {
		c.Spec.StorageClassName = ptr.To(class)
	}
	return c
}

func withClaimVolume(p *corev1.Pod, claim string) *corev1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, corev1.VolumeMount{Name: "data", MountPath: "/data"})
	return p
}

func runningPod(ctx context.Context, c *cluster.Cluster, namespace, name string) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &p); err != nil {
		return nil, err
	}
	if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
		return nil, fmt.Errorf("%s is %s on %q: %s", name, p.Status.Phase, p.Spec.NodeName, reasonOf(&p))
	}
	return &p, nil
}

// TestVolumes runs pods with PersistentVolumeClaims on a cluster whose default StorageClass is
// rancher's local-path-provisioner with volumeBindingMode WaitForFirstConsumer (the default
// classes of EKS, GKE and AKS wait for the first consumer too): a pod with a generic ephemeral
// volume (its claim made by kube-controller-manager's ephemeral controller), a gang of four pods
// each with its own claim, a pod whose claim only a static local volume of one node matches, a
// pod moving onto its predecessor's claim, and claims that can never be satisfied. fairway
// chooses the node, asks the provisioner for the volume there (or binds the static one), and
// binds the pods once their claims are bound. The pods carry fairway's labels and gang
// annotations themselves (the webhook, left out here, would make each bare pod a gang of its
// own); TestVolumesArgo runs with the webhook.
func TestVolumes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "a100", Count: 3, GPUType: "A100", GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUsPerNode: 4,
		GPUMemoryMiB: 81920, CPU: "64", Memory: "512Gi"}
	const ns = "vol"
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, LocalPathProvisioner: true},
		[]client.Object{exampleQueue("vol", ns, "")}, stack.Options{NoWebhook: true})

	// A pod with a generic ephemeral volume.
	eph := dashPod(ns, "scratch", "vol", "").gpus(1).pod()
	eph.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: newPVC("", "", "", "1Gi").Spec}}}}}
	mustCreate(t, c, eph)

	// A gang of four, each with its own claim: all bound together once all four volumes exist.
	for i := range 4 {
		name := fmt.Sprintf("train-%d", i)
		mustCreate(t, c, newPVC(ns, "ckpt-"+name, "", "5Gi"))
		mustCreate(t, c, withClaimVolume(dashPod(ns, name, "vol", "").gpus(1).gang("train", 4).pod(), "ckpt-"+name))
	}

	// A static local volume on a100-2 (no provisioner): its claim's pod goes there.
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	mustCreate(t, c, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "local-static"},
		Provisioner: volumehelpers.NotSupportedProvisioner, VolumeBindingMode: &wffc})
	mustCreate(t, c, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "local-a100-2"}, Spec: corev1.PersistentVolumeSpec{
		StorageClassName: "local-static", AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("50Gi")},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disks/ssd0"}},
		NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpIn, Values: []string{"a100-2"}}}}}}},
	}})
	mustCreate(t, c, newPVC(ns, "dataset", "local-static", "20Gi"))
	mustCreate(t, c, withClaimVolume(dashPod(ns, "pinned", "vol", "").gpus(1).pod(), "dataset"))

	// A pod whose RWO claim a previous pod used: created while the old pod still terminates.
	mustCreate(t, c, newPVC(ns, "notes", "", "1Gi"))
	mustCreate(t, c, withClaimVolume(dashPod(ns, "editor-1", "vol", "").pod(), "notes"))

	// Claims that can never be satisfied: bigger than every static volume of a class without a
	// provisioner, and of a class whose allowedTopologies match no node.
	mustCreate(t, c, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "zone-nowhere"}, Provisioner: cluster.LocalPathProvisionerName,
		VolumeBindingMode: &wffc, AllowedTopologies: []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: corev1.LabelTopologyZone, Values: []string{"us-east-1z"}}}}}})
	mustCreate(t, c, newPVC(ns, "huge", "local-static", "10Ti"))
	mustCreate(t, c, withClaimVolume(dashPod(ns, "hopeless", "vol", "").pod(), "huge"))
	mustCreate(t, c, newPVC(ns, "far", "zone-nowhere", "1Gi"))
	mustCreate(t, c, withClaimVolume(dashPod(ns, "faraway", "vol", "").pod(), "far"))

	eventually(t, 90*time.Second, "the ephemeral-volume pod, the gang and the pinned pod running", func(ctx context.Context) (bool, error) {
		for _, n := range []string{"scratch", "train-0", "train-1", "train-2", "train-3", "pinned", "editor-1"} {
			if _, err := runningPod(ctx, c, ns, n); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	p, _ := runningPod(ctx, c, ns, "scratch")
	claimOnNode(t, c, ns, "scratch-data", p.Spec.NodeName)
	var ephClaim corev1.PersistentVolumeClaim
	if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "scratch-data"}, &ephClaim); err == nil {
		if ref := metav1.GetControllerOf(&ephClaim); ref == nil || ref.Name != "scratch" {
			t.Errorf("claim scratch-data is not the ephemeral controller's claim of pod scratch: owner %v", ref)
		}
	}
	// The gang's pods were bound together: none before the last volume was ready.
	var first, last time.Time
	for i := range 4 {
		name := fmt.Sprintf("train-%d", i)
		p, _ := runningPod(ctx, c, ns, name)
		claimOnNode(t, c, ns, "ckpt-"+name, p.Spec.NodeName)
		if p.Annotations[fairwayv1.PodGroupAnnotation] != "train" {
			t.Errorf("pod %s is not of gang train: %v", name, p.Annotations)
		}
		var pvc corev1.PersistentVolumeClaim
		if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: "ckpt-" + name}, &pvc); err == nil {
			var pv corev1.PersistentVolume
			if err := c.Client().Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, &pv); err == nil && pv.CreationTimestamp.After(last) {
				last = pv.CreationTimestamp.Time
			}
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionTrue && (first.IsZero() || cond.LastTransitionTime.Before(&metav1.Time{Time: first})) {
				first = cond.LastTransitionTime.Time
			}
		}
	}
	// Both are whole seconds: the first binding is not before the second of the last volume.
	if first.Before(last) {
		t.Errorf("a pod of gang train was bound at %v, before its last volume was made at %v", first, last)
	}
	t.Logf("gang train: last volume made at %v, first pod bound at %v", last, first)
	// Each waiting pod was told so (events are written asynchronously).
	eventually(t, 10*time.Second, "WaitingForVolumes events on the gang's pods", func(ctx context.Context) (bool, error) {
		n := 0
		for _, note := range eventsFor(t, c, ctx, ns, "WaitingForVolumes") {
			if strings.Contains(note, "waiting for PersistentVolumeClaim vol/ckpt-train-") {
				n++
			}
		}
		return n >= 4, fmt.Errorf("%d of 4", n)
	})
	pinned, _ := runningPod(ctx, c, ns, "pinned")
	if pinned.Spec.NodeName != "a100-2" {
		t.Errorf("pod pinned runs on %s; its claim's only volume is on a100-2", pinned.Spec.NodeName)
	}
	claimOnNode(t, c, ns, "dataset", "a100-2")
	var pv corev1.PersistentVolume
	if err := c.Client().Get(ctx, client.ObjectKey{Name: "local-a100-2"}, &pv); err != nil || pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.Name != "dataset" {
		t.Errorf("static volume local-a100-2 not bound to claim dataset: %v %v", err, pv.Spec.ClaimRef)
	}

	// The editor moves: its successor, on the same claim, runs where the volume lives.
	old, _ := runningPod(ctx, c, ns, "editor-1")
	if err := c.Client().Delete(ctx, old, client.GracePeriodSeconds(5)); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, c, withClaimVolume(dashPod(ns, "editor-2", "vol", "").pod(), "notes"))
	eventually(t, 60*time.Second, "the editor's successor running on its volume's node", func(ctx context.Context) (bool, error) {
		p, err := runningPod(ctx, c, ns, "editor-2")
		if err != nil {
			return false, err
		}
		return p.Spec.NodeName == old.Spec.NodeName, fmt.Errorf("on %s, the volume on %s", p.Spec.NodeName, old.Spec.NodeName)
	})
	claimOnNode(t, c, ns, "notes", old.Spec.NodeName)

	// The hopeless pods wait with a reason naming their claim.
	for pod, want := range map[string]string{
		"hopeless": "PersistentVolumeClaim vol/huge: no PersistentVolume of StorageClass local-static matches it",
		"faraway":  "PersistentVolumeClaim vol/far: no node is in the allowedTopologies of StorageClass zone-nowhere",
	} {
		eventually(t, 30*time.Second, pod+" waiting with its claim's reason", func(ctx context.Context) (bool, error) {
			var p corev1.Pod
			if err := c.Client().Get(ctx, client.ObjectKey{Namespace: ns, Name: pod}, &p); err != nil {
				return false, err
			}
			r := reasonOf(&p)
			return p.Spec.NodeName == "" && strings.Contains(r, want), fmt.Errorf("node %q, reason %q", p.Spec.NodeName, r)
		})
	}
}

// TestVolumesArgo runs an Argo workflow with volumeClaimTemplates through the real
// workflow-controller and fairway's webhook: the controller creates the claim (of the default,
// WaitForFirstConsumer class) before the first step, fairway places the step and asks for the
// volume on its node, and the second step follows the volume to that node.
func TestVolumesArgo(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	gpu := cluster.NodePool{Name: "a100", Count: 2, GPUType: "A100", GPUProduct: "NVIDIA-A100-SXM4-80GB", GPUsPerNode: 4,
		GPUMemoryMiB: 81920, CPU: "64", Memory: "512Gi"}
	const ns = "vol"
	c := startExampleCluster(t, cluster.Config{NodePools: []cluster.NodePool{gpu}, LocalPathProvisioner: true},
		[]client.Object{exampleQueue("vol", ns, "")}, stack.Options{})
	// An Argo workflow whose steps share a volume of volumeClaimTemplates (the
	// workflow-controller creates the claim before the first pod).
	if _, err := c.StartArgo(ctx, cluster.ArgoOptions{}); err != nil {
		t.Fatalf("starting Argo: %v", err)
	}
	wf := mustUnstructured(t, volumeWorkflow)
	wf.SetNamespace(ns)
	kwokCompletes(t, wf, time.Second, nil)
	mustCreate(t, c, wf)
	if phase := waitUnstructured(t, c, wf, 120*time.Second, workflowDone); phase != "Succeeded" {
		msg, _, _ := unstructured.NestedString(wf.Object, "status", "message")
		t.Fatalf("workflow ended %s: %s; pods: %s; nodes: %s", phase, msg, describePods(podsIn(t, c, ctx, ns, map[string]string{"workflows.argoproj.io/workflow": wf.GetName()})), workflowNodes(wf))
	}
	var nodes []string
	on := map[string]bool{}
	for _, p := range podsIn(t, c, ctx, ns, map[string]string{"workflows.argoproj.io/workflow": wf.GetName()}) {
		nodes = append(nodes, p.Name+"@"+p.Spec.NodeName)
		on[p.Spec.NodeName] = true
		if p.Spec.SchedulerName != fairwayv1.SchedulerName {
			t.Errorf("step pod %s was scheduled by %q", p.Name, p.Spec.SchedulerName)
		}
	}
	if len(nodes) != 2 || len(on) != 1 {
		t.Errorf("the two steps sharing a local volume ran on %v", nodes)
	}
	t.Logf("workflow %s with volumeClaimTemplates Succeeded; steps %v", wf.GetName(), nodes)
}

// volumeWorkflow writes and reads a volume of its volumeClaimTemplates in two steps, which
// therefore run on the node where the volume was provisioned.
const volumeWorkflow = `
apiVersion: argoproj.io/v1alpha1
kind: Workflow
metadata:
  name: shared-workdir
spec:
  entrypoint: main
  volumeClaimTemplates:
  - metadata:
      name: workdir
    spec:
      accessModes: [ReadWriteOnce]
      resources:
        requests:
          storage: 1Gi
  templates:
  - name: main
    steps:
    - - name: write
        template: write
    - - name: read
        template: read
  - name: write
    container:
      image: busybox
      command: [sh, -c, "echo hello > /work/out"]
      volumeMounts:
      - {name: workdir, mountPath: /work}
      resources:
        limits:
          nvidia.com/gpu: "1"
  - name: read
    container:
      image: busybox
      command: [cat, /work/out]
      volumeMounts:
      - {name: workdir, mountPath: /work}
`
