package chart

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
	"github.com/fairway-sched/fairway/test/stack"
)

// fieldOwner is the server-side apply field manager of what Install applies.
const fieldOwner = "fairway-chart"

// workloadKinds are applied with server-side dry-run only: the API server validates and admits
// them as it would store them, but under kwok their pods would only pretend to run fairway.
// fairway runs as local processes under the chart's ServiceAccounts instead (RunAs).
var workloadKinds = map[string]bool{"Deployment": true, "DaemonSet": true, "StatefulSet": true, "Job": true}

// Installed says what Install did.
type Installed struct {
	// Applied are the objects stored, CRDs first; DryRun the workloads only admitted.
	Applied, DryRun []*unstructured.Unstructured
}

// Install puts a rendering into the cluster as `helm install --create-namespace` would, but
// without Helm's release bookkeeping: the CRDs first (waiting until they are Established), then
// the release namespace, then every other object by server-side apply, the workloads with
// server-side dry-run (see workloadKinds). Hooks are treated like any other object.
func Install(ctx context.Context, c *cluster.Cluster, r *Rendering, namespace string) (*Installed, error) {
	if namespace == "" {
		namespace = Namespace
	}
	if err := c.ApplyCRDObjects(ctx, r.Objects...); err != nil {
		return nil, fmt.Errorf("installing the chart's CRDs: %w", err)
	}
	in := &Installed{}
	for _, o := range r.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			in.Applied = append(in.Applied, o)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if err := c.Client().Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	// Pods (reservation pods, the webhook's probe) need the namespace's default ServiceAccount.
	if err := fairwayproc.WaitServiceAccount(ctx, c, namespace); err != nil {
		return nil, fmt.Errorf("waiting for the default ServiceAccount of %s: %w", namespace, err)
	}
	for _, o := range r.Objects {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		opts := []client.ApplyOption{client.FieldOwner(fieldOwner), client.ForceOwnership}
		if workloadKinds[o.GetKind()] {
			opts = append(opts, client.DryRunAll)
		}
		if err := c.Client().Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), opts...); err != nil {
			return nil, fmt.Errorf("applying %s %s: %w", o.GetKind(), o.GetName(), err)
		}
		if workloadKinds[o.GetKind()] {
			in.DryRun = append(in.DryRun, o)
		} else {
			in.Applied = append(in.Applied, o)
		}
	}
	return in, nil
}

// ServiceAccounts are the users of the chart's components in namespace, for stack.Options.RunAs.
func ServiceAccounts(namespace string) stack.Identities {
	if namespace == "" {
		namespace = Namespace
	}
	return stack.Identities{
		Scheduler: cluster.ServiceAccountUser(namespace, "fairway-scheduler"),
		Webhook:   cluster.ServiceAccountUser(namespace, "fairway-webhook"),
		Agent:     cluster.ServiceAccountUser(namespace, "fairway-agent"),
	}
}
