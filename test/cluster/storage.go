package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The local cluster's dynamic provisioner: rancher's local-path-provisioner (pinned by
// hack/tools/local-path-provisioner), run as a process with the cluster's kubeconfig, with
// LocalPathClass its WaitForFirstConsumer default StorageClass.
const (
	// LocalPathProvisionerName is the provisioner of LocalPathClass.
	LocalPathProvisionerName = "rancher.io/local-path"
	// LocalPathClass is the default StorageClass the provisioner serves.
	LocalPathClass = "local-path"
	// LocalPathNamespace is where the provisioner runs its helper pods.
	LocalPathNamespace = "local-path-storage"
)

// localPathHelperPod is the provisioner's helper pod template (its helperPod.yaml without the
// system-node-critical priority), of image. The provisioner puts it on the claim's selected node
// and waits for it to succeed; on kwok nodes the cluster's stages finish it after the annotated
// delay, as a real helper pod that creates the volume's directory finishes, and on real nodes
// (test/nodes) it runs.
func localPathHelperPod(image string) string {
	return `apiVersion: v1
kind: Pod
metadata:
  name: helper-pod
  annotations:
    ` + CompleteDelayAnnotation + `: "1s"
spec:
  containers:
  - name: helper-pod
    image: ` + image + `
    imagePullPolicy: IfNotPresent
`
}

// localPathConfig puts every node's volumes under one directory (of the node, not of this host:
// only helper pods touch it).
const localPathConfig = `{"nodePathMap":[{"node":"DEFAULT_PATH_FOR_NON_LISTED_NODES","paths":["/opt/local-path-provisioner"]}],"cmdTimeoutSeconds":60}`

// StartLocalPathProvisioner starts rancher's local-path-provisioner against the cluster (its
// namespace, ServiceAccount and ConfigMap first) and creates LocalPathClass, a default
// StorageClass with volumeBindingMode WaitForFirstConsumer (as the default classes of EKS, GKE
// and AKS are). It returns once the class exists.
func (c *Cluster) StartLocalPathProvisioner(ctx context.Context) (*Process, error) {
	if err := c.ensureNamespace(ctx, LocalPathNamespace); err != nil {
		return nil, err
	}
	cs := c.clientset
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "local-path-provisioner-service-account", Namespace: LocalPathNamespace}}
	if _, err := cs.CoreV1().ServiceAccounts(LocalPathNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the local-path-provisioner ServiceAccount: %w", err)
	}
	// The helper pods mount the setup and teardown scripts from this ConfigMap.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "local-path-config", Namespace: LocalPathNamespace}, Data: map[string]string{
		"config.json":    localPathConfig,
		"setup":          "#!/bin/sh\nset -eu\nmkdir -m 0777 -p \"$VOL_DIR\"\n",
		"teardown":       "#!/bin/sh\nset -eu\nrm -rf \"$VOL_DIR\"\n",
		"helperPod.yaml": localPathHelperPod(c.helperImage()),
	}}
	if _, err := cs.CoreV1().ConfigMaps(LocalPathNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating the local-path-provisioner ConfigMap: %w", err)
	}
	dir := filepath.Join(c.workDir, "local-path-provisioner")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	config, helper := filepath.Join(dir, "config.json"), filepath.Join(dir, "helperPod.yaml")
	if err := os.WriteFile(config, []byte(localPathConfig), 0o644); err != nil {
		return nil, fmt.Errorf("writing the local-path-provisioner config: %w", err)
	}
	image := c.helperImage()
	if err := os.WriteFile(helper, []byte(localPathHelperPod(image)), 0o644); err != nil {
		return nil, fmt.Errorf("writing the local-path-provisioner helper pod: %w", err)
	}
	p, err := c.startBin("local-path-provisioner", "local-path-provisioner", []string{
		"--debug", "start",
		"--kubeconfig=" + c.kubeconfig,
		"--namespace=" + LocalPathNamespace,
		"--provisioner-name=" + LocalPathProvisionerName,
		"--config=" + config,
		"--helper-pod-file=" + helper,
		"--configmap-name=local-path-config",
		"--service-account-name=" + sa.Name,
		// Never pulled: kwok runs no containers, and real nodes have it preloaded.
		"--helper-image=" + image,
	}, nil)
	if err != nil {
		return nil, err
	}
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: LocalPathClass, Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       LocalPathProvisionerName,
		VolumeBindingMode: &mode,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return p, fmt.Errorf("creating StorageClass %s: %w", LocalPathClass, err)
	}
	// The provisioner runs once it has read its config; a broken start shows as an exit.
	select {
	case <-ctx.Done():
	case <-time.After(2 * time.Second):
	}
	if exited, _ := p.Exited(); exited {
		return p, fmt.Errorf("local-path-provisioner exited: %w", p.exitError())
	}
	return p, nil
}

// helperImage is the local-path helper pods' image: Config.LocalPathHelperImage, or busybox.
func (c *Cluster) helperImage() string {
	if c.cfg.LocalPathHelperImage != "" {
		return c.cfg.LocalPathHelperImage
	}
	return "busybox"
}
