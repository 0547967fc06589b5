//go:build e2enodes

package e2enodes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// TestNotebookVolume: a notebook pod with a claim of the default WaitForFirstConsumer class.
// fairway picks the node and tells the provisioner (selected-node), rancher's local-path
// provisioner runs its helper pod on that real node to make the directory, the kubelet mounts
// the volume, and the notebook writes a file that is then on the node's disk. In the kwok tier
// the claim binds and the pod is bound, but the helper pod is finished by a kwok stage and
// nothing is ever mounted or written.
func TestNotebookVolume(t *testing.T) {
	c := cluster.StartT(t, cluster.Config{LocalPathProvisioner: true, LocalPathHelperImage: nodes.WorkloadImage})
	ns := nodes.StartT(t, c, nodes.Config{Count: 2, Labels: h100Labels()})
	startScheduler(t, c)
	const n = "notebooks"
	newNamespace(t, c, n)
	queue(t, c, n, "1", n) // interactive: within quota only

	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "home", Namespace: n},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	mustCreate(t, c, pvc)
	p := withGPUs(fairwayPod(n, "jupyter", n, `echo "notebook on $(hostname)" >/home/jovyan/hello.txt && cat /home/jovyan/hello.txt && exec sleep 3600`), 1)
	p.Annotations[fairwayv1.WorkloadKindAnnotation] = "notebook"
	p.Spec.PriorityClassName = fairwayv1.PriorityClassInteractive
	p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "home", MountPath: "/home/jovyan"}}
	p.Spec.Volumes = []corev1.Volume{{Name: "home", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "home"}}}}
	mustCreate(t, c, p)

	pod := waitPhase(t, c, n, "jupyter", corev1.PodRunning, 3*time.Minute)
	waitLog(t, c, n, "jupyter", "notebook on jupyter", 30*time.Second)
	claim, err := c.Clientset().CoreV1().PersistentVolumeClaims(n).Get(t.Context(), "home", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.Annotations["volume.kubernetes.io/selected-node"]; got != pod.Spec.NodeName {
		t.Errorf("claim's selected node %q, pod runs on %q", got, pod.Spec.NodeName)
	}
	pv, err := c.Clientset().CoreV1().PersistentVolumes().Get(t.Context(), claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var path string
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	default:
		t.Fatalf("volume %s is neither hostPath nor local: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	node := ns.Node(pod.Spec.NodeName)
	var out string
	eventually(t, 10*time.Second, "the file on the node's disk", func(ctx context.Context) (bool, error) {
		out, err = node.Exec(ctx, "cat", path+"/hello.txt")
		return err == nil, nil
	})
	if strings.TrimSpace(out) != "notebook on jupyter" {
		t.Errorf("%s:%s/hello.txt holds %q", node.Name, path, out)
	}
}
