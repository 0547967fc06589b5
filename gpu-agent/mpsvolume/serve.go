package mpsvolume

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/go-logr/logr"
	"google.golang.org/grpc"
	"k8s.io/apimachinery/pkg/types"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// Sockets say where the driver serves.
type Sockets struct {
	// CSI is the driver's endpoint, at the same path in the agent and on the node
	// (/var/lib/kubelet/plugins/mps.fairway.dev/csi.sock).
	CSI string
	// RegistrationDir is the kubelet's plugin registration directory
	// (/var/lib/kubelet/plugins_registry); the driver serves its registration socket there.
	RegistrationDir string
}

// Serve resumes the pods published before a restart, serves the CSI services and registers with
// the kubelet, until ctx ends.
func (d *Driver) Serve(ctx context.Context, s Sockets) error {
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	if err := d.resume(ctx); err != nil {
		return err
	}
	csiServer := grpc.NewServer()
	csi.RegisterIdentityServer(csiServer, d)
	csi.RegisterNodeServer(csiServer, d)
	regServer := grpc.NewServer()
	registerapi.RegisterRegistrationServer(regServer, &registration{endpoint: s.CSI, log: d.opts.Log})

	errs := make(chan error, 2)
	for _, srv := range []struct {
		g    *grpc.Server
		path string
	}{{csiServer, s.CSI}, {regServer, filepath.Join(s.RegistrationDir, fairwayv1.MPSDriverName+"-reg.sock")}} {
		l, err := listen(srv.path)
		if err != nil {
			csiServer.Stop()
			regServer.Stop()
			return err
		}
		go func() { errs <- srv.g.Serve(l) }()
	}
	d.opts.Log.Info("Serving the MPS CSI driver", "driver", fairwayv1.MPSDriverName, "endpoint", s.CSI, "mps", d.Available())
	select {
	case <-ctx.Done():
	case err := <-errs:
		csiServer.Stop()
		regServer.Stop()
		return fmt.Errorf("serving the MPS CSI driver: %w", err)
	}
	regServer.Stop()
	csiServer.GracefulStop()
	d.mu.Lock()
	pods := d.pods
	d.pods = map[types.UID]*podState{}
	d.mu.Unlock()
	for _, ps := range pods {
		// Stop the daemons, keep the directories: the pods keep their mounts, and the next
		// agent resumes them.
		if ps.stop != nil {
			ps.stop()
			<-ps.done
		}
	}
	return nil
}

// listen makes a unix socket at path, replacing a stale one.
func listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", path, err)
	}
	return l, nil
}

// resume takes back the pods whose directories an earlier agent made: a pod still on the node
// gets its daemon again (the kubelet does not publish its volumes a second time), the
// directories of a pod gone are removed.
func (d *Driver) resume(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(d.opts.Root, "pods"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the MPS directories: %w", err)
	}
	pods, err := d.opts.Pods(ctx)
	if err != nil {
		return fmt.Errorf("listing the node's pods: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range entries {
		uid := types.UID(e.Name())
		found := false
		for i := range pods {
			p := &pods[i]
			if p.UID != uid {
				continue
			}
			found = true
			ps, err := d.podDirs(p)
			if err != nil {
				return err
			}
			ps.resumed = 2
			share, err := gpurequest.Parse(p.Annotations)
			if uuid := p.Annotations[fairwayv1.GPUUUIDAnnotation]; d.available && err == nil && !share.IsZero() && uuid != "" {
				d.startDaemon(p, ps, uuid, share)
			}
		}
		if !found {
			d.removeIfUnmounted(uid)
		}
	}
	return nil
}

// registration answers the kubelet's plugin watcher.
type registration struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
	log      logr.Logger
}

func (r *registration) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: fairwayv1.MPSDriverName, Endpoint: r.endpoint, SupportedVersions: []string{"1.0.0"}}, nil
}

func (r *registration) NotifyRegistrationStatus(_ context.Context, s *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if s.PluginRegistered {
		r.log.Info("Registered with the kubelet", "driver", fairwayv1.MPSDriverName)
	} else {
		r.log.Error(errors.New(s.Error), "The kubelet refused the registration", "driver", fairwayv1.MPSDriverName)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}
