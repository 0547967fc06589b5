//go:build e2e

package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fairway-sched/fairway/test/chart"
	"github.com/fairway-sched/fairway/test/cluster"
)

// checkFlowSchemas: the API server classifies the requests of the chart's scheduler
// ServiceAccount by the chart's FlowSchemas (workload-high for its work, leader-election for its
// Leases), and a tenant's by neither. API Priority and Fairness names the FlowSchema that matched
// in every response (X-Kubernetes-PF-FlowSchema-UID), so this asks the real classifier, not a
// copy of its rules.
func checkFlowSchemas(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	ctx := t.Context()
	uid := map[string]types.UID{}
	for _, name := range []string{"fairway-scheduler", "fairway-scheduler-leader-election"} {
		var fs flowcontrolv1.FlowSchema
		if err := c.Client().Get(ctx, client.ObjectKey{Name: name}, &fs); err != nil {
			t.Fatalf("the chart's FlowSchema %s: %v", name, err)
		}
		uid[name] = fs.UID
	}
	scheduler := schemaOf(t, c, cluster.ServiceAccountUser(chart.Namespace, "fairway-scheduler"))
	tenant := schemaOf(t, c, cluster.ServiceAccountUser("team-a", "default"))
	for _, check := range []struct {
		what string
		got  types.UID
		want string
	}{
		{"the scheduler listing pods", scheduler(func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1})
			return err
		}), "fairway-scheduler"},
		{"the scheduler reading a Lease", scheduler(func(ctx context.Context, cs kubernetes.Interface) error {
			_, err := cs.CoordinationV1().Leases(chart.Namespace).Get(ctx, "fairway-flowschema-probe", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}), "fairway-scheduler-leader-election"},
	} {
		if check.got != uid[check.want] {
			t.Errorf("%s: the API server classified it by FlowSchema UID %q, want %s (%s)", check.what, check.got, check.want, uid[check.want])
		} else {
			t.Logf("%s: classified by FlowSchema %s", check.what, check.want)
		}
	}
	got := tenant(func(_ context.Context, cs kubernetes.Interface) error {
		_, err := cs.Discovery().ServerVersion()
		return err
	})
	if got == "" || got == uid["fairway-scheduler"] || got == uid["fairway-scheduler-leader-election"] {
		t.Errorf("a tenant's request was classified by FlowSchema UID %q; want one of the API server's own", got)
	}
}

// schemaOf returns a function that makes requests as user and returns the FlowSchema UID the API
// server answered the last one with.
func schemaOf(t *testing.T, c *cluster.Cluster, user string) func(func(context.Context, kubernetes.Interface) error) types.UID {
	var mu sync.Mutex
	var last string
	cfg := c.RESTConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if resp != nil {
				mu.Lock()
				last = resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID)
				mu.Unlock()
			}
			return resp, err
		})
	})
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return func(do func(context.Context, kubernetes.Interface) error) types.UID {
		t.Helper()
		if err := do(t.Context(), cs); err != nil {
			t.Fatalf("a request as %s: %v", user, err)
		}
		mu.Lock()
		defer mu.Unlock()
		return types.UID(last)
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
