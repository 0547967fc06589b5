package cache

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

// OptionalKind is a kind the scheduler watches only where it is served: a framework's custom
// resource (Argo's Workflow, KubeRay's RayCluster, ...) whose operator may be installed after
// the scheduler, or never. WatchOptional starts its informer once the API server serves it.
type OptionalKind struct {
	GVK schema.GroupVersionKind
	// Trim is the informer's transform: what is kept of each object.
	Trim cache.TransformFunc
	// Setup adds the informer's handlers and keeps its lister, before it runs. An error leaves
	// the kind to the next look-up.
	Setup func(gvr schema.GroupVersionResource, inf informers.GenericInformer) error
	// Missing is logged once when the kind is not served at first; Watching when its informer
	// runs.
	Missing, Watching string
}

// WatchOptional starts the informer (unstructured objects, every namespace) of each kind the API
// server serves, and looks the others up again every interval, until all run or ctx ends. It is
// the one lazy watcher of the runtime: pipeline admission's runs and the gang owners of
// podgroups.Follower both go through it.
func WatchOptional(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, interval time.Duration, log logr.Logger, kinds []OptionalKind) {
	running := make([]bool, len(kinds))
	logged := make([]bool, len(kinds))
	for {
		left := 0
		for i, k := range kinds {
			if running[i] {
				continue
			}
			if err := startOptional(ctx, dyn, mapper, k); err != nil {
				if !logged[i] {
					log.V(1).Info(k.Missing, "kind", k.GVK.String(), "reason", err.Error())
					logged[i] = true
				}
				left++
				continue
			}
			running[i] = true
			log.V(1).Info(k.Watching, "kind", k.GVK.String())
		}
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func startOptional(ctx context.Context, dyn dynamic.Interface, mapper meta.RESTMapper, k OptionalKind) error {
	m, err := mapper.RESTMapping(k.GVK.GroupKind(), k.GVK.Version)
	if err != nil {
		return err
	}
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, m.Resource, metav1.NamespaceAll, 0, cache.Indexers{}, nil)
	if err := inf.Informer().SetTransform(k.Trim); err != nil {
		return err
	}
	if err := k.Setup(m.Resource, inf); err != nil {
		return err
	}
	go inf.Informer().Run(ctx.Done())
	return nil
}
