package v1alpha1

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
