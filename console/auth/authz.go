package auth

import (
	"context"
	"fmt"
	"sync"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/console/view"
)

// Authorizer finds what a user may see with SubjectAccessReviews, cached per user and
// question for TTL.
type Authorizer struct {
	Client kubernetes.Interface
	// TTL is how long an answer is believed (30 s when 0): a RoleBinding given or taken away
	// shows within it.
	TTL time.Duration
	// Self asks SelfSubjectAccessReviews instead, for the client's own user (local mode,
	// where the console runs as the person looking at it).
	Self bool
	// Parallel is how many reviews run at once for one user's namespaces (8 when 0).
	Parallel int
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu    sync.Mutex
	cache map[question]answer
}

type question struct {
	user                             string
	namespace, group, resource, verb string
}

type answer struct {
	allowed bool
	expires time.Time
}

// Scope asks what u may see; namespaces are the namespaces there is something to see in (the
// console's cache knows them), asked about one by one when u may not list pods everywhere.
func (a *Authorizer) Scope(ctx context.Context, u *User, namespaces []string) (view.Scope, error) {
	var sc view.Scope
	var err error
	if sc.All, err = a.allowed(ctx, u, "", "", "pods"); err != nil {
		return sc, err
	}
	if sc.Nodes, err = a.allowed(ctx, u, "", "", "nodes"); err != nil {
		return sc, err
	}
	if sc.Queues, err = a.allowed(ctx, u, "", fairwayv1.GroupVersion.Group, "queues"); err != nil {
		return sc, err
	}
	if sc.All {
		return sc, nil
	}
	sc.Namespaces = map[string]bool{}
	par := a.Parallel
	if par <= 0 {
		par = 8
	}
	type result struct {
		ns      string
		allowed bool
		err     error
	}
	sem := make(chan struct{}, par)
	results := make(chan result, len(namespaces))
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ok, err := a.allowed(ctx, u, ns, "", "pods")
			results <- result{ns, ok, err}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.err != nil {
			return view.Scope{}, r.err
		}
		if r.allowed {
			sc.Namespaces[r.ns] = true
		}
	}
	return sc, nil
}

// allowed asks whether u may list resource in namespace ("" for every namespace, or a
// cluster-scoped resource).
func (a *Authorizer) allowed(ctx context.Context, u *User, namespace, group, resource string) (bool, error) {
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	ttl := a.TTL
	if ttl == 0 {
		ttl = 30 * time.Second
	}
	q := question{user: u.key(), namespace: namespace, group: group, resource: resource, verb: "list"}
	a.mu.Lock()
	if a.cache == nil {
		a.cache = map[question]answer{}
	}
	if ans, ok := a.cache[q]; ok && now().Before(ans.expires) {
		a.mu.Unlock()
		return ans.allowed, nil
	}
	a.mu.Unlock()
	attrs := &authzv1.ResourceAttributes{Namespace: namespace, Verb: "list", Group: group, Resource: resource}
	var allowed bool
	if a.Self {
		r, err := a.Client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{
			Spec: authzv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attrs}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether you may list %s: %w", what(namespace, resource), err)
		}
		allowed = r.Status.Allowed
	} else {
		extra := map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			extra[k] = v
		}
		r, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
			Spec: authzv1.SubjectAccessReviewSpec{ResourceAttributes: attrs, User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra}},
			metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether %s may list %s: %w", u.Name, what(namespace, resource), err)
		}
		allowed = r.Status.Allowed
	}
	a.mu.Lock()
	for k, ans := range a.cache {
		if !now().Before(ans.expires) {
			delete(a.cache, k)
		}
	}
	a.cache[q] = answer{allowed: allowed, expires: now().Add(ttl)}
	a.mu.Unlock()
	return allowed, nil
}

func what(namespace, resource string) string {
	if namespace == "" {
		return resource
	}
	return resource + " in namespace " + namespace
}
