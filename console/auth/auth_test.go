package auth_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/fairway-sched/fairway/console/auth"
)

func TestProxyBelievesOnlyTrustedPeers(t *testing.T) {
	trusted, err := auth.ParsePrefixes([]string{"10.0.0.0/8", "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := &auth.Proxy{Trusted: trusted}
	req := func(peer string, hdr map[string][]string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = peer
		for k, vs := range hdr {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		return r
	}
	u, err := p.Authenticate(req("10.1.2.3:5555", map[string][]string{"X-Forwarded-User": {"alice"}, "X-Forwarded-Groups": {"team-b, ml", "ops"}}))
	if err != nil || u.Name != "alice" || !slices.Equal(u.Groups, []string{"team-b", "ml", "ops"}) {
		t.Errorf("trusted proxy: %+v, %v", u, err)
	}
	if _, err := p.Authenticate(req("192.168.1.1:5555", map[string][]string{"X-Forwarded-User": {"admin"}})); err == nil {
		t.Error("a user header from an untrusted peer was believed")
	}
	if _, err := p.Authenticate(req("[::ffff:127.0.0.1]:5555", map[string][]string{"X-Forwarded-User": {"bob"}})); err != nil {
		t.Errorf("an IPv4-mapped loopback peer: %v", err)
	}
	if _, err := p.Authenticate(req("10.1.2.3:5555", nil)); err == nil {
		t.Error("no user header from the proxy was accepted")
	}
	if _, err := auth.ParsePrefixes([]string{"not-an-address"}); err == nil {
		t.Error("a bad --trusted-proxies entry was accepted")
	}
}

// TestAuthorizerScopesAndCaches: a user who may list pods only in team-b sees team-b; the
// answers are cached for the TTL.
func TestAuthorizerScopesAndCaches(t *testing.T) {
	var calls atomic.Int32
	cs := fake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "alice" && ra.Verb == "list" && ra.Resource == "pods" && ra.Namespace == "team-b"
		if sar.Spec.User == "root" {
			sar.Status.Allowed = true
		}
		return true, sar, nil
	})
	now := time.Unix(1000, 0)
	a := &auth.Authorizer{Client: cs, TTL: time.Minute, Now: func() time.Time { return now }}
	nss := []string{"team-a", "team-b", "team-c"}
	sc, err := a.Scope(t.Context(), &auth.User{Name: "alice"}, nss)
	if err != nil {
		t.Fatal(err)
	}
	if sc.All || sc.Nodes || sc.Queues || !sc.Sees("team-b") || sc.Sees("team-a") || sc.Sees("team-c") {
		t.Errorf("alice's scope %+v; want team-b only", sc)
	}
	if n := calls.Load(); n != 6 {
		t.Errorf("%d reviews for alice's first page, want 6 (pods, nodes, queues everywhere, pods in 3 namespaces)", n)
	}
	if _, err := a.Scope(t.Context(), &auth.User{Name: "alice"}, nss); err != nil || calls.Load() != 6 {
		t.Errorf("a second page within the TTL asked again (%d reviews)", calls.Load())
	}
	now = now.Add(2 * time.Minute)
	if _, err := a.Scope(t.Context(), &auth.User{Name: "alice"}, nss); err != nil || calls.Load() != 12 {
		t.Errorf("after the TTL the answers were not asked again (%d reviews)", calls.Load())
	}
	sc, err = a.Scope(t.Context(), &auth.User{Name: "root"}, nss)
	if err != nil || !sc.All || !sc.Nodes || !sc.Queues {
		t.Errorf("root's scope %+v, %v; want everything", sc, err)
	}
	// Another user with alice's name but other groups is asked about again.
	before := calls.Load()
	if _, err := a.Scope(t.Context(), &auth.User{Name: "alice", Groups: []string{"admins"}}, nss); err != nil || calls.Load() == before {
		t.Errorf("groups are not part of the cache key")
	}
}
