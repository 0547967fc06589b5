// Package nodes runs real worker nodes for a local test cluster (test/cluster): Docker
// containers of the node image (`make images`, hack/images/node) whose kubelets join the
// cluster's control plane and run pods in containerd. It is test infrastructure for the
// real-node e2e tier (test/e2enodes), never part of the product.
//
// Each node container shares the host's network namespace (docker run --network host), because
// the control plane listens on 127.0.0.1 only: the kubelet reaches the API server at 127.0.0.1.
// The kubelet refuses a loopback node IP, so each node serves on a /32 of its own on a port-less
// bridge in the host's namespace, reachable from this host only, and reports it as its
// InternalIP, where the API server reaches it back for logs and exec. Pods
// get their own network namespaces on a CNI bridge per node (its own name and /24), so pods of
// all nodes reach each other through the host's routing table. The kubelet authenticates with a
// client certificate signed by the cluster CA (system:node:<name>), made before it starts: no
// TLS bootstrap.
//
// Each node has fake nvidia.com/gpu devices, advertised by a device plugin this package serves
// from the test process over the kubelet's real device-plugin gRPC API
// (k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1), on a socket in a host directory bind-mounted
// as the node's /var/lib/kubelet/device-plugins. Device IDs are fakegpu.DeviceUUID, the UUIDs
// go-nvml's mock reports for the node, so a gpu-agent on the mock (pointed at the node's
// PodResources socket, likewise bind-mounted) sees the allocations the kubelet itself made.
package nodes
