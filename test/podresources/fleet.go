package podresources

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// NodeSpec is one fake node the stand-in serves.
type NodeSpec struct {
	Name string
	// Socket is the unix socket path the node's agent reads (--pod-resources-socket).
	Socket string
	// Devices are the node's nvidia.com/gpu device IDs in index order: the UUIDs of its
	// fake GPUs (fakegpu.DeviceUUID).
	Devices []string
}

// Fleet is the stand-in of several fake nodes, fed by one pod informer, so a cluster of many
// fake nodes costs one watch and no extra process.
type Fleet struct {
	servers map[string]*Server
	stops   []func()
	cancel  context.CancelFunc
}

// StartFleet serves every node's socket and keeps the assignments in step with the pods of the
// cluster until Stop or ctx ends. It returns once the informer has synced, so pods that exist
// already are assigned.
func StartFleet(ctx context.Context, cs kubernetes.Interface, nodes []NodeSpec, log logr.Logger) (*Fleet, error) {
	f := &Fleet{servers: map[string]*Server{}}
	for _, n := range nodes {
		s := NewServer(n.Name, n.Devices)
		stop, err := s.Serve(n.Socket)
		if err != nil {
			f.Stop()
			return nil, fmt.Errorf("serving PodResources for %s: %w", n.Name, err)
		}
		f.servers[n.Name] = s
		f.stops = append(f.stops, stop)
	}
	ctx, f.cancel = context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(cs, 0)
	inf := factory.Core().V1().Pods().Informer()
	observe := func(obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		if s := f.servers[pod.Spec.NodeName]; s != nil {
			if err := s.Observe(pod); err != nil {
				log.Error(err, "Pod not admitted by the PodResources stand-in", "pod", klog.KObj(pod))
			}
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				if s := f.servers[pod.Spec.NodeName]; s != nil {
					s.Forget(pod.UID)
				}
			}
		},
	})
	if err != nil {
		f.Stop()
		return nil, fmt.Errorf("watching pods: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		f.Stop()
		return nil, fmt.Errorf("pod informer did not sync")
	}
	return f, nil
}

// Server returns the stand-in of node, nil if the fleet does not serve it.
func (f *Fleet) Server(node string) *Server { return f.servers[node] }

// Stop closes every socket and the watch.
func (f *Fleet) Stop() {
	if f.cancel != nil {
		f.cancel()
	}
	for _, stop := range f.stops {
		stop()
	}
	f.stops = nil
}
