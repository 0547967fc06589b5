// Package mpsvolume is the gpu-agent's CSI driver (v1alpha1.MPSDriverName): it gives each
// fractional pod on the node an MPS endpoint of its own, without hostPath in the pod.
//
// The webhook puts two CSI ephemeral inline volumes of this driver into a fractional pod's spec
// (its MPS pipe directory and its /dev/shm). The kubelet, which found the driver through its
// plugin registration API (k8s.io/kubelet/pkg/apis/pluginregistration/v1: no node-driver-
// registrar sidecar), calls NodePublishVolume with the pod's name, namespace and UID
// (podInfoOnMount). The driver makes directories of that pod alone under the agent's MPS root,
// owned by the user the pod's GPU container runs as, bind-mounts them at the kubelet's target,
// and, where MPS runs, starts an MPS control daemon for that pod alone: its pipe directory, its
// /dev/shm, only its GPU visible, and the pod's memory limit and thread percentage set on the
// server side, which no process in the pod can raise. It decides whose directories to mount from
// the kubelet's pod information only, never from the volume's attributes, and refuses pods that
// hold no GPU share, so a pod that names the driver itself gets nothing of another pod's.
//
// Why a CSI driver rather than CDI or the device plugin's Allocate response: see
// docs/isolation.md.
package mpsvolume
