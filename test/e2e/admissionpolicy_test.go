//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/fairwayproc"
)

// checkAdmissionPolicies proves the chart's ValidatingAdmissionPolicies on the API server, with
// the components' identities impersonated (the agent's with its node's name, as its pod-bound
// token carries it): what RBAC grants but a component must not do is refused, each with the
// policy's message, and what the component does is allowed. It runs after checkRBAC, whose
// audit-log check would count these refusals as the components'.
func checkAdmissionPolicies(t *testing.T, c *cluster.Cluster) {
	ctx := t.Context()
	as := func(user, node string) kubernetes.Interface {
		cfg := c.RESTConfig()
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
		if node != "" {
			cfg.Impersonate.Extra = map[string][]string{fairwayv1.NodeNameExtra: {node}}
		}
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return cs
	}
	agent := cluster.ServiceAccountUser(chart.Namespace, "fairway-agent")
	sched := cluster.ServiceAccountUser(chart.Namespace, "fairway-scheduler")
	hook := cluster.ServiceAccountUser(chart.Namespace, "fairway-webhook")
	hookConfigs := as(hook, "").AdmissionregistrationV1().MutatingWebhookConfigurations()
	// The uninstall hook removed the webhook's configuration: one of its shape stands in (it
	// selects no namespace), made by the admin; the webhook reads its own from an informer.
	adminConfigs := c.Clientset().AdmissionregistrationV1().MutatingWebhookConfigurations()
	ownConfiguration := func() (*admissionregistrationv1.MutatingWebhookConfiguration, error) {
		mwc, err := adminConfigs.Get(ctx, fairwayproc.ConfigurationName, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return mwc, err
		}
		return adminConfigs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: fairwayproc.ConfigurationName},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name:         "pods.fairway.dev",
				ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://localhost:1/mutate")},
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
				}},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e.fairway.dev/none": "none"},
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn,
						Values: []string{"kube-system", chart.Namespace}}}},
				FailurePolicy:           ptr.To(admissionregistrationv1.Ignore),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
			}},
		}, metav1.CreateOptions{})
	}
	defer func() {
		_ = adminConfigs.Delete(context.Background(), fairwayproc.ConfigurationName, metav1.DeleteOptions{})
	}()
	annotate := []byte(`{"metadata":{"annotations":{"e2e.fairway.dev/touched":"yes"}}}`)
	idle := []byte(`{"status":{"conditions":[{"type":"fairway.dev/GPUIdle","status":"False"}]}}`)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "on-h100-0", Namespace: "default"},
		Spec:       corev1.PodSpec{NodeName: "h100-0", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
	if _, err := c.Clientset().CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	users := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "users-settings", Namespace: "default"}, Data: map[string]string{"k": "v"}}
	if _, err := c.Clientset().CoreV1().ConfigMaps("default").Create(ctx, users, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The agent of node ("" for an identity without one) patches a Node, or the test pod (its
	// status with subresource "status").
	agentPatchesNode := func(node, target string) error {
		_, err := as(agent, node).CoreV1().Nodes().Patch(ctx, target, types.MergePatchType, annotate, metav1.PatchOptions{})
		return err
	}
	agentPatchesPod := func(node string, pt types.PatchType, patch []byte, sub ...string) error {
		_, err := as(agent, node).CoreV1().Pods("default").Patch(ctx, pod.Name, pt, patch, metav1.PatchOptions{}, sub...)
		return err
	}
	schedCMs := as(sched, "").CoreV1().ConfigMaps("default")

	type check struct {
		what string
		do   func() error
		// refused is a part of the refusal's message; "" when the request must succeed.
		refused string
	}
	ours := func(name string, labels map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels}}
	}
	fw := map[string]string{fairwayv1.ManagedByLabel: fairwayv1.ManagedByValue}
	checks := []check{
		{"the agent of gpu-7 patches Node h100-0", func() error { return agentPatchesNode("gpu-7", "h100-0") }, "the gpu-agent of node gpu-7 may change only its own Node and the pods on it, not Node h100-0"},
		{"the agent of h100-0 patches its own Node", func() error { return agentPatchesNode("h100-0", "h100-0") }, ""},
		{"the agent of gpu-7 patches a pod on h100-0", func() error { return agentPatchesPod("gpu-7", types.MergePatchType, annotate) }, "not pod default/on-h100-0 on node h100-0"},
		{"the agent of gpu-7 patches the status of a pod on h100-0", func() error {
			return agentPatchesPod("gpu-7", types.StrategicMergePatchType, idle, "status")
		}, "not pod default/on-h100-0 on node h100-0"},
		{"the agent of h100-0 patches the pod on its node", func() error { return agentPatchesPod("h100-0", types.MergePatchType, annotate) }, ""},
		{"the agent's identity without a node patches a Node", func() error { return agentPatchesNode("", "h100-0") }, "this request names none"},
		// Since issue 35 the scheduler writes no ConfigMap (a share's GPU comes from the
		// gpu-agent's device plugin): RBAC gives it none.
		{"the scheduler updates a user's ConfigMap", func() error {
			cm, err := schedCMs.Get(ctx, users.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cm.Data = map[string]string{"k": "overwritten"}
			_, err = schedCMs.Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}, `cannot get resource "configmaps"`},
		{"the scheduler creates a GPU ConfigMap", func() error {
			_, err := schedCMs.Create(ctx, ours("fairway-gpu-x", fw), metav1.CreateOptions{})
			return err
		}, `cannot create resource "configmaps"`},
	}
	checks = append(checks,
		check{"the webhook creates a MutatingWebhookConfiguration of another name", func() error {
			_, err := hookConfigs.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "intercept-all"}}, metav1.CreateOptions{})
			return err
		}, "may keep only its own MutatingWebhookConfiguration fairway-webhook, not MutatingWebhookConfiguration intercept-all"},
		check{"the webhook makes its configuration intercept Secrets", func() error {
			mwc, err := ownConfiguration()
			if err != nil {
				return err
			}
			mwc.Webhooks[0].Rules[0].Resources = []string{"pods", "secrets"}
			_, err = hookConfigs.Update(ctx, mwc, metav1.UpdateOptions{})
			return err
		}, "may only intercept pods"},
		check{"the webhook makes its configuration intercept kube-system", func() error {
			mwc, err := ownConfiguration()
			if err != nil {
				return err
			}
			mwc.Webhooks[0].NamespaceSelector.MatchExpressions = nil
			_, err = hookConfigs.Update(ctx, mwc, metav1.UpdateOptions{})
			return err
		}, "must leave kube-system and " + chart.Namespace + " alone"},
		check{"the webhook makes its configuration intercept deletions", func() error {
			mwc, err := ownConfiguration()
			if err != nil {
				return err
			}
			mwc.Webhooks[0].Rules[0].Operations = append(mwc.Webhooks[0].Rules[0].Operations, admissionregistrationv1.Delete)
			_, err = hookConfigs.Update(ctx, mwc, metav1.UpdateOptions{})
			return err
		}, "may only intercept CREATE and UPDATE"},
		check{"the webhook points its configuration at another server", func() error {
			mwc, err := ownConfiguration()
			if err != nil {
				return err
			}
			mwc.Webhooks[0].ClientConfig.URL = ptr.To("https://collector.example.com/mutate")
			_, err = hookConfigs.Update(ctx, mwc, metav1.UpdateOptions{})
			return err
		}, "may call only Service " + chart.Namespace + "/fairway-webhook"},
		check{"the webhook updates its own configuration's pods webhook", func() error {
			mwc, err := ownConfiguration()
			if err != nil {
				return err
			}
			mwc.Webhooks[0].TimeoutSeconds = ptr.To[int32](7)
			_, err = hookConfigs.Update(ctx, mwc, metav1.UpdateOptions{})
			return err
		}, ""},
	)
	for _, ch := range checks {
		err := ch.do()
		switch {
		case ch.refused == "" && err != nil:
			t.Errorf("%s: %v, want it allowed", ch.what, err)
		case ch.refused != "" && err == nil:
			t.Errorf("%s: allowed, want it refused", ch.what)
		case ch.refused != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), ch.refused)):
			t.Errorf("%s: %v, want a refusal saying %q", ch.what, err, ch.refused)
		case ch.refused != "":
			t.Logf("%s: refused: %v", ch.what, err)
		}
	}
	cm, err := c.Clientset().CoreV1().ConfigMaps("default").Get(ctx, users.Name, metav1.GetOptions{})
	if err != nil || cm.Data["k"] != "v" {
		t.Errorf("the user's ConfigMap: %v %v", cm.Data, err)
	}
}
