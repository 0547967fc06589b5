// Package cluster starts and stops a real, local Kubernetes control plane for fairway's e2e
// tests, benchmarks and demo: etcd, kube-apiserver, kube-controller-manager and kwok, plus on
// request the real kube-scheduler, the Argo workflow-controller, the KubeRay operator and any
// other process (fairway's own binaries). Every binary is built from pinned Go modules by
// hack/build-tools.sh, so nothing but Go is needed: no containers, no kind, no downloads.
//
// Nodes are kwok fake nodes described by NodePools (GPU type, count, memory, topology labels);
// kwok plays their kubelet through the Stages in stages/, which make nodes Ready, pods Running,
// Job pods Succeeded, and any pod annotated with pod-complete.stage.kwok.x-k8s.io/delay
// Succeeded after that delay (Argo step pods get it through the Workflow's podMetadata). A
// deleted pod turns Failed before it is removed, as with a kubelet, so that a pod kept by a
// finalizer shows that it holds nothing.
//
// Everything listens on 127.0.0.1 on free ports and lives in a temporary directory, so tests can
// run side by side. Children run in their own process group with a parent-death signal, so they
// die with the test binary even when it is killed. Typical use in a test:
//
//	c := cluster.StartT(t, cluster.Config{
//		NodePools:     []cluster.NodePool{cluster.H100Pool(4)},
//		KubeScheduler: true,
//	})
//	cl := c.Client()
//
// StartT stops the cluster when the test ends and, when the test failed, copies every
// component's log into test/e2e/_artifacts/<test name>.
package cluster
