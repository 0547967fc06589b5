//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
	"github.com/fairway-sched/fairway/test/stack"
)

// This file holds what the examples' e2e tests (examples_<name>_test.go) share. Each test starts
// its own small cluster with the whole of fairway (gpu-agents, scheduler, webhook; test/stack)
// and applies the files under examples/ themselves, never a copy. What a test must add for kwok,
// which runs no containers, it adds in the open at apply time (see kwokCompletes).

// exampleQueue is a leaf queue serving one namespace, with a GPU guarantee ("" for none).
func exampleQueue(name, namespace, gpuQuota string) *fairwayv1.Queue {
	q := &fairwayv1.Queue{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: fairwayv1.QueueSpec{Namespaces: []string{namespace}}}
	if gpuQuota != "" {
		v := resource.MustParse(gpuQuota)
		q.Spec.Resources.GPU = &fairwayv1.ResourceQuota{Quota: &v}
	}
	return q
}

// startExample starts a cluster of the node pools, creates objs in order (the namespaces of
// Queues first; namespaces wait for their default ServiceAccount), and runs fairway on it; the
// webhook is serving opts.ProbeNamespace, or the first Queue's first namespace, when it returns.
func startExample(t *testing.T, pools []cluster.NodePool, objs []client.Object, opts stack.Options) *cluster.Cluster {
	t.Helper()
	return startExampleCluster(t, cluster.Config{NodePools: pools}, objs, opts)
}

// startExampleCluster is startExample on a cluster of cfg (a storage provisioner, for example).
func startExampleCluster(t *testing.T, cfg cluster.Config, objs []client.Object, opts stack.Options) *cluster.Cluster {
	t.Helper()
	begin := time.Now()
	c := cluster.StartT(t, cfg)
	for _, obj := range objs {
		if q, ok := obj.(*fairwayv1.Queue); ok {
			for _, ns := range q.Spec.Namespaces {
				newNamespace(t, c, ns)
			}
			if opts.ProbeNamespace == "" && len(q.Spec.Namespaces) > 0 {
				opts.ProbeNamespace = q.Spec.Namespaces[0]
			}
		}
		if obj.GetObjectKind().GroupVersionKind().Kind == "Namespace" {
			newNamespace(t, c, obj.GetName())
			continue
		}
		mustCreate(t, c, obj)
	}
	if opts.Binary == "" {
		opts.Binary = fairwayBinary(t)
	}
	opts.Log = testr.New(t)
	s, err := stack.Start(t.Context(), c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	t.Logf("cluster and fairway ready after %v", time.Since(begin).Round(time.Millisecond))
	return c
}

// exampleObjects reads a file of the examples.
func exampleObjects(t *testing.T, elem ...string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := examples.Objects(elem...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// exampleObject reads a file of the examples that holds one object, placed in namespace.
func exampleObject(t *testing.T, namespace string, elem ...string) *unstructured.Unstructured {
	t.Helper()
	obj, err := examples.Object(elem...)
	if err != nil {
		t.Fatal(err)
	}
	obj.SetNamespace(namespace)
	return obj
}

// kwokCompletes has kwok finish a Workflow's pods (kwok runs no containers, and its stock
// stages finish only Job pods): every step pod gets the delay annotation of test/cluster's
// pod-complete stage through spec.podMetadata, and the templates named in perTemplate their own
// delay through the template's metadata, which Argo applies after the workflow's.
func kwokCompletes(t *testing.T, wf *unstructured.Unstructured, delay time.Duration, perTemplate map[string]time.Duration) {
	t.Helper()
	if err := unstructured.SetNestedField(wf.Object, delay.String(), "spec", "podMetadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
		t.Fatal(err)
	}
	templates, _, _ := unstructured.NestedSlice(wf.Object, "spec", "templates")
	for _, tmpl := range templates {
		m := tmpl.(map[string]any)
		d, ok := perTemplate[fmt.Sprint(m["name"])]
		if !ok {
			continue
		}
		if err := unstructured.SetNestedField(m, d.String(), "metadata", "annotations", cluster.CompleteDelayAnnotation); err != nil {
			t.Fatal(err)
		}
	}
	if err := unstructured.SetNestedSlice(wf.Object, templates, "spec", "templates"); err != nil {
		t.Fatal(err)
	}
}

// gpusOf is the whole GPUs a pod's containers ask for.
func gpusOf(p *corev1.Pod) int64 {
	var n int64
	for _, c := range p.Spec.Containers {
		q := c.Resources.Limits[fairwayv1.ResourceGPU]
		n += q.Value()
	}
	return n
}

// nodeGPUTypes maps node names to their fairway.dev/gpu-type label.
func nodeGPUTypes(t *testing.T, c *cluster.Cluster) map[string]string {
	t.Helper()
	var nodes corev1.NodeList
	if err := c.Client().List(t.Context(), &nodes); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range nodes.Items {
		out[n.Name] = n.Labels[fairwayv1.GPUTypeLabel]
	}
	return out
}

// disrupted reports why a pod is being taken away ("" when it is not): deleted, or marked by
// fairway's evictor with the DisruptionTarget condition.
func disrupted(p *corev1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "deleted"
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return "DisruptionTarget: " + c.Message
		}
	}
	return ""
}

// queueStatus reads a Queue's status amounts of a resource (gpu, gpu/<type>, ...).
func queueStatus(ctx context.Context, c *cluster.Cluster, name string) (*fairwayv1.Queue, error) {
	var q fairwayv1.Queue
	err := c.Client().Get(ctx, client.ObjectKey{Name: name}, &q)
	return &q, err
}

func amount(list corev1.ResourceList, name string) float64 {
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		return 0
	}
	return q.AsApproximateFloat64()
}

// unstructuredSet sets a field of an object read from the examples (a test's change, such as a
// Job's parallelism or kwok's completion delay).
func unstructuredSet(obj *unstructured.Unstructured, value any, fields ...string) error {
	return unstructured.SetNestedField(obj.Object, value, fields...)
}
