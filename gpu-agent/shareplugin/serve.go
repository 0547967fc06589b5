package shareplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	fairwayv1alpha1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// DefaultPluginDir is the kubelet's device-plugin directory (pluginapi.DevicePluginPath).
const DefaultPluginDir = pluginapi.DevicePluginPath

// checkEvery is how often Serve checks that the kubelet has not restarted. A restarted kubelet
// empties its device-plugin directory, our socket included, and opens a new kubelet.sock; the
// plugin then serves and registers again. Polling two stat calls is what NVIDIA's plugin does
// with fsnotify; it needs no watcher that a removed directory would end.
const checkEvery = 2 * time.Second

// Serve serves the plugin on its socket in dir (the kubelet's device-plugin directory) and
// registers it with the kubelet there, again whenever the kubelet restarts, until ctx ends.
func (p *Plugin) Serve(ctx context.Context, dir string) error {
	for {
		// Served: again once the kubelet restarted. Failed: again after checkEvery. Never both:
		// serving again while served replaces the socket under the kubelet's connection and
		// registers a second time, which the kubelet refuses ("device plugin already
		// connected") while its Allocate calls find no socket.
		stopped, err := p.serveOnce(ctx, dir)
		var retry <-chan time.Time
		if err != nil {
			p.opts.Log.Error(err, "Serving the GPU share device plugin; retrying")
			retry = time.After(checkEvery)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-stopped:
		case <-retry:
		}
	}
}

// serveOnce serves and registers, and returns a channel closed when the kubelet restarted (or
// the socket went away); it stops its server itself.
func (p *Plugin) serveOnce(ctx context.Context, dir string) (<-chan struct{}, error) {
	sock := filepath.Join(dir, fairwayv1alpha1.ShareDevicePluginSocket)
	kubelet := filepath.Join(dir, filepath.Base(pluginapi.KubeletSocket))
	kst, err := os.Stat(kubelet)
	if err != nil {
		return nil, fmt.Errorf("the kubelet's registration socket: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("removing the old socket %s: %w", sock, err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() { _ = srv.Serve(lis) }()
	if err := register(ctx, kubelet, p.pluginOptions()); err != nil {
		srv.Stop()
		return nil, err
	}
	p.opts.Log.Info("Registered the GPU share device plugin with the kubelet", "resource", fairwayv1alpha1.ResourceGPUShare, "socket", sock)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		defer srv.Stop()
		t := time.NewTicker(checkEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			st, err := os.Stat(kubelet)
			if err != nil || !os.SameFile(st, kst) {
				p.opts.Log.Info("The kubelet restarted; registering again")
				return
			}
			if _, err := os.Stat(sock); err != nil {
				p.opts.Log.Info("The plugin's socket was removed; serving again")
				return
			}
		}
	}()
	return stopped, nil
}

func register(ctx context.Context, kubelet string, opts *pluginapi.DevicePluginOptions) error {
	conn, err := grpc.NewClient("unix://"+kubelet, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dialing the kubelet at %s: %w", kubelet, err)
	}
	defer conn.Close()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     fairwayv1alpha1.ShareDevicePluginSocket,
		ResourceName: string(fairwayv1alpha1.ResourceGPUShare),
		Options:      opts,
	})
	if err != nil {
		return fmt.Errorf("registering %s with the kubelet: %w", fairwayv1alpha1.ResourceGPUShare, err)
	}
	return nil
}
