package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// A newcomer's first `fairway why NAME` or `fairway jobs` runs in the kubeconfig's namespace,
// usually "default", where nothing of theirs lives. The helpers here look in the other
// namespaces the user may read, so that the answer names the flag to add (-n NAMESPACE or -A)
// instead of only saying "not found".

// match is an object named as asked: "pod" or "PodGroup", and its namespace.
type match struct{ kind, namespace string }

// findByName looks for the objects of kinds ("PodGroup", "pod") named name in every namespace
// the user may read: with one cluster-wide list per kind where RBAC allows it, else by a get in
// each namespace the user may list. The matches are sorted by namespace. It fails only when it
// could look nowhere.
func (o *Options) findByName(ctx context.Context, name string, kinds ...string) ([]match, error) {
	var out []match
	var namespaces []string // listed once, for the kinds the user may not list cluster-wide
	for _, kind := range kinds {
		newObj := func() client.Object { return &corev1.Pod{} }
		var list client.ObjectList = &corev1.PodList{}
		if kind == "PodGroup" {
			newObj = func() client.Object { return &fairwayv1.PodGroup{} }
			list = &fairwayv1.PodGroupList{}
		}
		if err := o.Client.List(ctx, list, client.MatchingFields{"metadata.name": name}); err == nil {
			for _, ns := range namespacesOf(list) {
				out = append(out, match{kind: kind, namespace: ns})
			}
			continue
		}
		if namespaces == nil {
			var nss corev1.NamespaceList
			if err := o.Client.List(ctx, &nss); err != nil {
				return nil, fmt.Errorf("listing the namespaces to look for %s in: %w", name, err)
			}
			namespaces = []string{}
			for _, ns := range nss.Items {
				namespaces = append(namespaces, ns.Name)
			}
		}
		for _, ns := range namespaces {
			if err := o.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, newObj()); err == nil {
				out = append(out, match{kind: kind, namespace: ns})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b match) int { return strings.Compare(a.namespace, b.namespace) })
	return out, nil
}

func namespacesOf(list client.ObjectList) []string {
	var out []string
	switch l := list.(type) {
	case *corev1.PodList:
		for _, p := range l.Items {
			out = append(out, p.Namespace)
		}
	case *fairwayv1.PodGroupList:
		for _, pg := range l.Items {
			out = append(out, pg.Namespace)
		}
	}
	return out
}

// elsewhereHint follows "no pod named NAME in namespace NS": the namespaces where NAME is, with
// the command to run for the first, or that it is in no namespace the user may read. arg is
// what the user typed (NAME or pod/NAME).
func (o *Options) elsewhereHint(ctx context.Context, name, arg string, kinds ...string) string {
	matches, err := o.findByName(ctx, name, kinds...)
	switch {
	case err != nil:
		return "`fairway jobs -A` lists the jobs of every namespace"
	case len(matches) == 0:
		return "nor in any namespace you may read; `fairway jobs -A` lists the jobs of every namespace"
	}
	var namespaces []string
	found := map[string][]string{} // namespace -> kinds
	for _, m := range matches {
		if found[m.namespace] == nil {
			namespaces = append(namespaces, m.namespace)
		}
		found[m.namespace] = append(found[m.namespace], m.kind)
	}
	where := make([]string, len(namespaces))
	for i, ns := range namespaces {
		where[i] = strings.Join(found[ns], " and ") + " in namespace " + ns
	}
	return fmt.Sprintf("found %s: `fairway why %s -n %s`", strings.Join(where, ", "), arg, namespaces[0])
}

// jobsElsewhere counts the fairway jobs of the namespaces other than ns, by namespace ("team-a
// (3), team-b (1)"), for `fairway jobs` in an empty namespace, and names the first namespace;
// "" when there are none or the user may not list them cluster-wide.
func (o *Options) jobsElsewhere(ctx context.Context, ns string) (counts, first string) {
	all := *o
	all.AllNamespaces = true
	s, err := all.loadJobs(ctx)
	if err != nil {
		return "", ""
	}
	count := map[string]int{}
	var order []string
	for _, j := range BuildJobs(s, o.Now()).Items {
		if j.Namespace == ns {
			continue
		}
		if count[j.Namespace] == 0 {
			order = append(order, j.Namespace)
		}
		count[j.Namespace]++
	}
	slices.Sort(order)
	parts := make([]string, len(order))
	for i, n := range order {
		parts[i] = fmt.Sprintf("%s (%d)", n, count[n])
	}
	if len(order) == 0 {
		return "", ""
	}
	return strings.Join(parts, ", "), order[0]
}
