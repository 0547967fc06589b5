package v1alpha1

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// NamespaceMatcher answers whether a Queue serves a namespace, from spec.namespaces and
// spec.namespaceSelector. The webhook and the scheduler both resolve namespaces with it, so they
// never disagree on which queue serves a namespace.
//
// +kubebuilder:object:generate=false
type NamespaceMatcher struct {
	names    []string
	selector labels.Selector // nil: no selector
}

// NewNamespaceMatcher returns the matcher of spec. A malformed selector is an error naming the
// field; the queue then serves its listed namespaces only.
func NewNamespaceMatcher(spec *QueueSpec) (NamespaceMatcher, error) {
	m := NamespaceMatcher{names: spec.Namespaces}
	if spec.NamespaceSelector == nil {
		return m, nil
	}
	if len(spec.NamespaceSelector.MatchLabels) == 0 && len(spec.NamespaceSelector.MatchExpressions) == 0 {
		return m, fmt.Errorf("spec.namespaceSelector is empty: it would select every namespace; set matchLabels or matchExpressions")
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector)
	if err != nil {
		return m, fmt.Errorf("spec.namespaceSelector: %w", err)
	}
	m.selector = sel
	return m, nil
}

// HasSelector reports whether the queue selects namespaces by label.
func (m NamespaceMatcher) HasSelector() bool { return m.selector != nil }

// Serves reports whether the namespace of this name and these labels is served.
func (m NamespaceMatcher) Serves(name string, nsLabels map[string]string) bool {
	if slices.Contains(m.names, name) {
		return true
	}
	return m.selector != nil && m.selector.Matches(labels.Set(nsLabels))
}
