// Package adapters holds the interface that fairway's framework integrations implement and the
// helpers they share. Each framework (Kubeflow Pipelines, Argo Workflows, KubeRay, JupyterHub,
// PyTorchJob, JobSet) lives in its own sub-package; adapters/registry lists them in the order the
// webhook asks them.
//
// An adapter answers, from a pod as it reaches admission, the questions fairway's webhook needs:
// is this pod yours, what kind of work is it, which gang does it belong to and how large is the
// gang, which priority does it get by default, which container gets a GPU share, and which queue
// does the framework object name. Adapters read framework objects as unstructured objects through
// ObjectReader, never through the frameworks' Go modules.
//
// What belongs here: the interface, the Workload it returns, and small helpers used by more than
// one adapter (gang names, owner references, queue labels on framework objects).
package adapters
