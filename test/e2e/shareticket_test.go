//go:build e2e

package e2e

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// shareTicketOnly checks how a fractional pod gets its GPU since issue 35: its GPU container asks
// the kubelet for one fairway.dev/gpu-share (the gpu-agent's device plugin answers with the GPU
// recorded on the pod), and nothing in the pod or its namespace names the GPU: no
// NVIDIA_VISIBLE_DEVICES, no ConfigMap reference, no fairway.dev/gpu-configmap.
func shareTicketOnly(p *corev1.Pod) error {
	if _, ok := p.Annotations[fairwayv1.GPUConfigMapAnnotation]; ok {
		return fmt.Errorf("pod %s/%s carries %s", p.Namespace, p.Name, fairwayv1.GPUConfigMapAnnotation)
	}
	if n := fairwayv1.ShareRequest(p); n != 1 {
		return fmt.Errorf("pod %s/%s asks for %d %s, want 1", p.Namespace, p.Name, n, fairwayv1.ResourceGPUShare)
	}
	for _, c := range append(append([]corev1.Container(nil), p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, e := range c.Env {
			if e.Name == "NVIDIA_VISIBLE_DEVICES" || (e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil) {
				return fmt.Errorf("pod %s/%s container %s: env %s from %+v", p.Namespace, p.Name, c.Name, e.Name, e.ValueFrom)
			}
		}
	}
	return nil
}
