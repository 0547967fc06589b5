// Package adapters holds the interface that fairway's framework integrations implement and the
// helpers they share. Each framework lives in its own sub-package: pipelines and workflows
// (Kubeflow Pipelines, Argo Workflows, Airflow, MLflow), notebooks (JupyterHub, Kubeflow
// Notebooks), training (KubeRay, the Training Operator's PyTorchJob, MPIJob, TFJob, XGBoostJob,
// PaddleJob and JAXJob, JobSet) and inference (LeaderWorkerSet, KServe, Knative, and the Triton
// and vLLM model servers). Two more adapters are no framework: gangs users name themselves
// (usergang) and the plain-pod fallback. adapters/registry lists them all in the order the
// webhook asks them; a test there checks that this list, the webhook's help and the chart name
// every framework.
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
