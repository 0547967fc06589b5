package cache

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
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

// ProbeServed returns mapper with a RESTMapping that first asks the API server whether the
// kind's group version is served (GET /apis/<group>/<version>, a small answer, 404 when not) and
// answers NoKindMatch without going to mapper when it is not. controller-runtime's lazy mapper
// reloads the whole aggregated discovery on every miss, so WatchOptional's look-up of each
// missing framework kind every interval cost a full discovery per kind (4-6% of the scheduler's
// allocations in a bench-e2e burst on a cluster without the frameworks); the probe costs one
// small request per kind, and the mapper reloads once, when the kind appears.
func ProbeServed(mapper meta.RESTMapper, dc discovery.ServerResourcesInterfaceWithContext) meta.RESTMapper {
	return probingMapper{RESTMapper: mapper, dc: dc}
}

type probingMapper struct {
	meta.RESTMapper
	dc discovery.ServerResourcesInterfaceWithContext
}

// probeTimeout bounds one probe: RESTMapping takes no context.
const probeTimeout = 30 * time.Second

func (m probingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	if len(versions) == 1 && gk.Group != "" {
		gv := schema.GroupVersion{Group: gk.Group, Version: versions[0]}
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		_, err := m.dc.ServerResourcesForGroupVersionWithContext(ctx, gv.String())
		cancel()
		if err != nil {
			if apierrors.IsNotFound(err) {
				return nil, &meta.NoKindMatchError{GroupKind: gk, SearchedVersions: versions}
			}
			return nil, fmt.Errorf("asking whether %s is served: %w", gv, err)
		}
	}
	return m.RESTMapper.RESTMapping(gk, versions...)
}
