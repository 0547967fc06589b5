package podresources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

type podAssignment struct {
	namespace, name string
	// containers in pod order; devices per container.
	containers []string
	devices    map[string][]string
}

// Server is the PodResources stand-in of one node. It is safe for concurrent use.
type Server struct {
	podresourcesv1.UnimplementedPodResourcesListerServer

	node     string
	resource string
	devices  []string

	mu    sync.Mutex
	pods  map[types.UID]*podAssignment
	owner map[string]types.UID // device -> pod
}

var _ podresourcesv1.PodResourcesListerServer = (*Server)(nil)

// NewServer returns the stand-in for node, whose nvidia.com/gpu devices are devices (in index
// order).
func NewServer(node string, devices []string) *Server {
	return &Server{
		node:     node,
		resource: fairwayv1alpha1.ResourceGPU,
		devices:  slices.Clone(devices),
		pods:     map[types.UID]*podAssignment{},
		owner:    map[string]types.UID{},
	}
}

// Node is the node this stand-in serves.
func (s *Server) Node() string { return s.node }

// Observe updates the stand-in with a pod's current state, as the kubelet admits pods bound to
// it and releases those that end. Pods of other nodes are ignored.
func (s *Server) Observe(pod *corev1.Pod) error {
	if pod.Spec.NodeName != s.node {
		return nil
	}
	if pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		s.Forget(pod.UID)
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.pods[pod.UID]; ok {
		return nil // assignments are stable for the pod's life
	}
	a := &podAssignment{namespace: pod.Namespace, name: pod.Name, devices: map[string][]string{}}
	var taken []string
	for _, c := range pod.Spec.Containers {
		a.containers = append(a.containers, c.Name)
		q, ok := c.Resources.Limits[corev1.ResourceName(s.resource)]
		if !ok || q.Value() == 0 {
			continue
		}
		for _, d := range s.devices {
			if int64(len(a.devices[c.Name])) == q.Value() {
				break
			}
			if _, used := s.owner[d]; !used && !slices.Contains(taken, d) {
				a.devices[c.Name] = append(a.devices[c.Name], d)
				taken = append(taken, d)
			}
		}
		if int64(len(a.devices[c.Name])) < q.Value() {
			// The kubelet would refuse to admit the pod (UnexpectedAdmissionError).
			return fmt.Errorf("pod %s/%s container %s wants %d %s, only %d free on %s",
				pod.Namespace, pod.Name, c.Name, q.Value(), s.resource, len(a.devices[c.Name]), s.node)
		}
	}
	for _, d := range taken {
		s.owner[d] = pod.UID
	}
	s.pods[pod.UID] = a
	return nil
}

// Forget releases a pod's devices.
func (s *Server) Forget(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.pods[uid]
	if !ok {
		return
	}
	for _, ds := range a.devices {
		for _, d := range ds {
			delete(s.owner, d)
		}
	}
	delete(s.pods, uid)
}

// Assigned returns the devices given to a pod, all containers together, in container order.
func (s *Server) Assigned(uid types.UID) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.pods[uid]
	if !ok {
		return nil
	}
	var out []string
	for _, c := range a.containers {
		out = append(out, a.devices[c]...)
	}
	return out
}

func (s *Server) podResources(a *podAssignment) *podresourcesv1.PodResources {
	pr := &podresourcesv1.PodResources{Name: a.name, Namespace: a.namespace}
	for _, c := range a.containers {
		cr := &podresourcesv1.ContainerResources{Name: c}
		if ds := a.devices[c]; len(ds) > 0 {
			cr.Devices = []*podresourcesv1.ContainerDevices{{ResourceName: s.resource, DeviceIds: slices.Clone(ds)}}
		}
		pr.Containers = append(pr.Containers, cr)
	}
	return pr
}

// List implements PodResourcesListerServer: every admitted pod of the node.
func (s *Server) List(context.Context, *podresourcesv1.ListPodResourcesRequest) (*podresourcesv1.ListPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	resp := &podresourcesv1.ListPodResourcesResponse{}
	for _, a := range s.pods {
		resp.PodResources = append(resp.PodResources, s.podResources(a))
	}
	slices.SortFunc(resp.PodResources, func(x, y *podresourcesv1.PodResources) int {
		if x.Namespace != y.Namespace {
			return cmp.Compare(x.Namespace, y.Namespace)
		}
		return cmp.Compare(x.Name, y.Name)
	})
	return resp, nil
}

// Get implements PodResourcesListerServer.
func (s *Server) Get(_ context.Context, req *podresourcesv1.GetPodResourcesRequest) (*podresourcesv1.GetPodResourcesResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.pods {
		if a.namespace == req.PodNamespace && a.name == req.PodName {
			return &podresourcesv1.GetPodResourcesResponse{PodResources: s.podResources(a)}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "pod %s/%s not found on %s", req.PodNamespace, req.PodName, s.node)
}

// GetAllocatableResources implements PodResourcesListerServer: every device of the node.
func (s *Server) GetAllocatableResources(context.Context, *podresourcesv1.AllocatableResourcesRequest) (*podresourcesv1.AllocatableResourcesResponse, error) {
	return &podresourcesv1.AllocatableResourcesResponse{
		Devices: []*podresourcesv1.ContainerDevices{{ResourceName: s.resource, DeviceIds: slices.Clone(s.devices)}},
	}, nil
}

// Serve listens on the unix socket path (replacing a stale one) until Stop.
func (s *Server) Serve(socket string) (stop func(), err error) {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing stale socket: %w", err)
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", socket, err)
	}
	g := grpc.NewServer()
	podresourcesv1.RegisterPodResourcesListerServer(g, s)
	go func() { _ = g.Serve(l) }()
	return func() { g.Stop(); _ = os.Remove(socket) }, nil
}
