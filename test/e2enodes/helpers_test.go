//go:build e2enodes

package e2enodes

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/nodes"
)

// eventually polls cond until it holds, failing the test with what after timeout.
func eventually(t *testing.T, timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

func mustCreate(t *testing.T, c *cluster.Cluster, obj client.Object) {
	t.Helper()
	if err := c.Client().Create(t.Context(), obj); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func newNamespace(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	mustCreate(t, c, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	eventually(t, 30*time.Second, "the default ServiceAccount of "+name, func(ctx context.Context) (bool, error) {
		_, err := c.Clientset().CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
}

// shPod is a pod of the preloaded busybox image running script with sh, on node when not empty.
func shPod(namespace, name, node, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "main", Image: nodes.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"/bin/sh", "-c", script},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}},
			}},
		},
	}
}

func getPod(ctx context.Context, c *cluster.Cluster, namespace, name string) (*corev1.Pod, error) {
	return c.Clientset().CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
}

// waitPhase waits for the pod to reach phase, failing early (with its status) when it ends in
// another one.
func waitPhase(t *testing.T, c *cluster.Cluster, namespace, name string, phase corev1.PodPhase, timeout time.Duration) *corev1.Pod {
	t.Helper()
	var last *corev1.Pod
	t.Cleanup(func() {
		if t.Failed() && last != nil && last.Status.Phase != phase {
			for _, c := range last.Status.Conditions {
				t.Logf("pod %s/%s on %q: %s=%s %s: %s", namespace, name, last.Spec.NodeName, c.Type, c.Status, c.Reason, c.Message)
			}
		}
	})
	eventually(t, timeout, "pod "+namespace+"/"+name+" "+string(phase), func(ctx context.Context) (bool, error) {
		p, err := getPod(ctx, c, namespace, name)
		if err != nil {
			return false, nil
		}
		last = p
		if p.Status.Phase != phase && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed) {
			logs, _ := podLogs(ctx, c, namespace, name)
			t.Fatalf("pod %s/%s ended %s (%s: %s), not %s; logs:\n%s", namespace, name, p.Status.Phase, p.Status.Reason, p.Status.Message, phase, logs)
		}
		return p.Status.Phase == phase, nil
	})
	return last
}

// podLogs reads a pod's container log through the API server, which asks the kubelet.
func podLogs(ctx context.Context, c *cluster.Cluster, namespace, name string) (string, error) {
	b, err := c.Clientset().CoreV1().Pods(namespace).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	return string(bytes.TrimSpace(b)), err
}

// waitLog waits for the pod's log to contain want and returns the log.
func waitLog(t *testing.T, c *cluster.Cluster, namespace, name, want string, timeout time.Duration) string {
	t.Helper()
	var logs string
	eventually(t, timeout, "pod "+namespace+"/"+name+" logging "+want, func(ctx context.Context) (bool, error) {
		l, err := podLogs(ctx, c, namespace, name)
		logs = l
		return err == nil && strings.Contains(l, want), nil
	})
	return logs
}
