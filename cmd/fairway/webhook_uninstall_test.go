package main

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestUninstallConfiguration(t *testing.T) {
	cs := fake.NewClientset(
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "fairway-webhook"}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "other"}},
	)
	var reports []string
	if err := uninstallConfiguration(t.Context(), cs, "fairway-webhook", 0, func(s string) { reports = append(reports, s) }); err != nil {
		t.Fatal(err)
	}
	api := cs.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Get(t.Context(), "fairway-webhook", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("fairway-webhook still there: %v", err)
	}
	if _, err := api.Get(t.Context(), "other", metav1.GetOptions{}); err != nil {
		t.Errorf("another configuration was touched: %v", err)
	}
	if len(reports) != 1 {
		t.Errorf("reports %q, want one deletion", reports)
	}
	// Nothing to delete is not an error.
	if err := uninstallConfiguration(t.Context(), cs, "fairway-webhook", 0, func(string) {}); err != nil {
		t.Errorf("second run: %v", err)
	}
}
