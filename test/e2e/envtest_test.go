//go:build e2e

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/fairway-sched/fairway/test/cluster"
)

// TestEnvtest proves that controller-runtime's envtest runs on the binaries `make tools` builds
// (it needs etcd, kube-apiserver and kubectl there: BinaryAssetsDirectory here, or
// KUBEBUILDER_ASSETS=bin from a shell), so controller tests can use envtest where a whole
// cluster is more than they need.
func TestEnvtest(t *testing.T) {
	t.Parallel()
	cl, err := client.New(startEnvtest(t), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "envtest"}}
	if err := cl.Create(t.Context(), ns); err != nil {
		t.Fatalf("creating a namespace through envtest: %v", err)
	}
}

// startEnvtest starts an API server and etcd (no controllers, no nodes) from the binaries `make
// tools` builds, stopped when t ends.
func startEnvtest(t *testing.T) *rest.Config {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: bin}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("starting envtest with its binaries from %s: %v", bin, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stopping envtest: %v", err)
		}
	})
	return cfg
}
