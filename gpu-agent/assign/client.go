package assign

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultSocket is where the kubelet serves the PodResources API.
const DefaultSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// maxMessage matches the kubelet's own client: a node with many pods answers big lists.
const maxMessage = 16 << 20

// Lister lists the devices of every pod the kubelet admitted: pod -> device IDs of resource,
// across containers in order.
type Lister interface {
	List(ctx context.Context, resource string) (map[types.NamespacedName][]string, error)
}

// Client is a Lister over the PodResources gRPC API.
type Client struct {
	conn    *grpc.ClientConn
	api     podresourcesv1.PodResourcesListerClient
	timeout time.Duration
}

var _ Lister = (*Client)(nil)

// Dial connects lazily to the PodResources socket; calls fail (and are retried by the caller)
// while the kubelet is not serving it.
func Dial(socket string) (*Client, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("PodResources client for %s: %w", socket, err)
	}
	return &Client{conn: conn, api: podresourcesv1.NewPodResourcesListerClient(conn), timeout: 5 * time.Second}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// List implements Lister.
func (c *Client) List(ctx context.Context, resource string) (map[types.NamespacedName][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.api.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing pod resources: %w", err)
	}
	out := map[types.NamespacedName][]string{}
	for _, pr := range resp.GetPodResources() {
		key := types.NamespacedName{Namespace: pr.GetNamespace(), Name: pr.GetName()}
		var ids []string
		for _, c := range pr.GetContainers() {
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == resource {
					ids = append(ids, d.GetDeviceIds()...)
				}
			}
		}
		out[key] = ids
	}
	return out, nil
}

// Allocatable lists the device IDs of resource the kubelet can hand out (GetAllocatableResources):
// every device the device plugin advertises, allocated or not. A time-slicing device plugin lists
// each GPU once per replica, which is how the agent tells a time-sliced node.
func (c *Client) Allocatable(ctx context.Context, resource string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := c.api.GetAllocatableResources(ctx, &podresourcesv1.AllocatableResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing allocatable resources: %w", err)
	}
	var ids []string
	for _, d := range resp.GetDevices() {
		if d.GetResourceName() == resource {
			ids = append(ids, d.GetDeviceIds()...)
		}
	}
	return ids, nil
}
