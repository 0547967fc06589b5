// Command kfp stands in, on the real-node tier, for the two images of Kubeflow Pipelines that
// every KFP v2 run's pods use, ghcr.io/kubeflow/kfp-driver and ghcr.io/kubeflow/kfp-launcher,
// which no registry here serves and which need KFP's API server and ML Metadata. One static
// binary plays each part by the name it is run as, so a run compiled by KFP goes through the
// real Argo controller and real kubelets with the shape KFP gives it:
//
//	driver --type ... --*_path FILE ...   the driver: writes the outputs the real driver would
//	                                      (examples.KFPDriverRun: the executor's pod-spec patch with
//	                                      the component's resources, its GPU among them), with this
//	                                      image ($KFP_STANDIN_IMAGE) for the component's
//	launcher-v2 --copy DST                the launcher's init container: copies itself to DST
//	launch ... -- COMMAND                 the launcher in the executor's main container: prints the
//	                                      component it stands for and exits 0 (components are
//	                                      Python programs; this image has no Python)
//
// It is test infrastructure (hack/images/standins.sh builds it into fairway.local/kfp-standin),
// never part of the product.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/test/examples"
)

func main() {
	var err error
	switch name := filepath.Base(os.Args[0]); name {
	case "driver":
		err = drive(os.Args[1:])
	case "launcher-v2":
		err = copySelf(os.Args[1:])
	case "launch":
		err = launch(os.Args[1:])
	default:
		err = fmt.Errorf("run as driver, launcher-v2 or launch, not %q", name)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kfp-standin %s: %v\n", filepath.Base(os.Args[0]), err)
		os.Exit(1)
	}
}

// drive writes each output to the file its --<name>_path flag names, as the real driver does
// (Argo's wait container then reports them).
func drive(args []string) error {
	outputs, err := examples.KFPDriverRun(args, os.Getenv("ARGO_NODE_ID"))
	if err != nil {
		return err
	}
	if p, ok := outputs["pod-spec-patch"]; ok {
		if outputs["pod-spec-patch"], err = withOwnImage(p); err != nil {
			return err
		}
	}
	paths := map[string]string{}
	for i := 0; i+1 < len(args); i += 2 {
		if f, ok := strings.CutSuffix(strings.TrimPrefix(args[i], "--"), "_path"); ok {
			paths[strings.ReplaceAll(f, "_", "-")] = args[i+1]
		}
	}
	for name, value := range outputs {
		path, ok := paths[name]
		if !ok {
			return fmt.Errorf("no --%s_path flag for output %s", strings.ReplaceAll(name, "-", "_"), name)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return err
		}
		fmt.Printf("output %s = %s\n", name, value)
	}
	return nil
}

// withOwnImage runs the component on this image, whose launch part stands for it.
func withOwnImage(patch string) (string, error) {
	image := os.Getenv("KFP_STANDIN_IMAGE")
	if image == "" {
		return "", fmt.Errorf("KFP_STANDIN_IMAGE is not set")
	}
	var spec corev1.PodSpec
	if err := json.Unmarshal([]byte(patch), &spec); err != nil {
		return "", fmt.Errorf("pod-spec-patch: %w", err)
	}
	for i := range spec.Containers {
		spec.Containers[i].Image = image
	}
	b, err := json.Marshal(spec)
	return string(b), err
}

func copySelf(args []string) error {
	if len(args) != 2 || args[0] != "--copy" {
		return fmt.Errorf("usage: launcher-v2 --copy DST, got %q", args)
	}
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return err
	}
	defer self.Close()
	dst, err := os.OpenFile(args[1], os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, self); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

func launch(args []string) error {
	flags := map[string]string{}
	for i := 0; i+1 < len(args) && args[i] != "--"; i += 2 {
		flags[strings.TrimPrefix(args[i], "--")] = args[i+1]
	}
	fmt.Printf("kfp-standin launch: pipeline %s, run %s, execution %s, pod %s: component stood in for, exit 0\n",
		flags["pipeline_name"], flags["run_id"], flags["execution_id"], flags["pod_name"])
	// What a GPU reaches the container as: a whole GPU as the NVIDIA device plugin's variable
	// (for the NVIDIA runtime), a fairway share as its GPU's device node from fairway's device
	// plugin (the node's fake /dev/nvidia<minor>, test/nodes).
	if v := os.Getenv("NVIDIA_VISIBLE_DEVICES"); v != "" {
		fmt.Printf("NVIDIA_VISIBLE_DEVICES=%s\n", v)
	}
	if nodes := gpuDeviceNodes(); len(nodes) > 0 {
		fmt.Printf("GPU_DEVICE_NODES=%s\n", strings.Join(nodes, ","))
	}
	return nil
}

// gpuDeviceNodes are the GPU device nodes in the container's /dev, /dev/nvidia<minor> (not the
// driver's control nodes, /dev/nvidiactl and the like).
func gpuDeviceNodes() []string {
	paths, _ := filepath.Glob("/dev/nvidia*")
	var out []string
	for _, p := range paths {
		n := strings.TrimPrefix(filepath.Base(p), "nvidia")
		if n != "" && strings.Trim(n, "0123456789") == "" {
			out = append(out, p)
		}
	}
	return out
}
