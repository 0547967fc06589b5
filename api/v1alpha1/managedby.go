package v1alpha1

import (
	"slices"
	"strings"
)

// Objects fairway's components create for themselves carry ManagedByLabel=ManagedByValue: the
// GPU ConfigMaps of fractional pods and the PodGroups the runtime derives. The chart's
// ValidatingAdmissionPolicy lets the scheduler's ServiceAccount create and change ConfigMaps only
// with it (RBAC cannot select by label), and the runtime never writes over an object without it,
// so a user's ConfigMap or PodGroup of the same name is left as its author wrote it.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "fairway"
)

// NodeNameExtra is the user-info extra the API server gives a ServiceAccount token bound to a pod:
// the name of the pod's node (Kubernetes 1.32+). The chart's ValidatingAdmissionPolicy lets a
// gpu-agent's identity change only its own Node and the pods bound to it, as NodeRestriction does
// for kubelets.
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// IsFairwayIdentity reports whether an API request's user (request.userInfo) may write keys that
// only fairway writes (RunAdmissionKeys): one of fairway's components, a ServiceAccount of
// fairway's own namespace, or a cluster admin (group MastersGroup, which bypasses RBAC and could
// remove the webhook anyway; local and test clusters run fairway with such credentials). Tenants
// hold neither: a ServiceAccount of fairway's namespace, or a pod running as one, needs rights in
// that namespace.
func IsFairwayIdentity(username string, groups []string, fairwayNamespace string) bool {
	return (fairwayNamespace != "" && strings.HasPrefix(username, ServiceAccountUserPrefix(fairwayNamespace))) ||
		slices.Contains(groups, MastersGroup)
}

// MastersGroup is the Kubernetes group whose members bypass authorization.
const MastersGroup = "system:masters"

// ServiceAccountUserPrefix is how the API server names every ServiceAccount of namespace ns.
func ServiceAccountUserPrefix(ns string) string { return "system:serviceaccount:" + ns + ":" }
