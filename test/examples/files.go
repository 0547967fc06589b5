// Package examples reads the user-facing examples under <repo root>/examples for the tests that
// exercise them: the e2e tests (test/e2e/examples_*_test.go) apply the files themselves, never a
// copy, and the unit tests here check that every file parses and decodes, that the Kubeflow
// Pipelines example's pipeline.py and workflow.yaml agree, and that the JupyterHub profiles render
// into the pods KubeSpawner makes.
//
// What cannot run on a local cluster is played here, in the open: KFP's driver (FakeKFPDriver
// computes the outputs the real driver writes, from the same inputs) and KubeSpawner
// (RenderNotebook builds the pod KubeSpawner 7.x builds from a zero-to-jupyterhub profile).
package examples

import (
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/test/cluster"
)

// Dir returns <repo root>/examples.
func Dir() (string, error) {
	root, err := cluster.RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "examples"), nil
}

// Path returns the path of a file of the examples, e.g. Path("argo", "workflow.yaml").
func Path(elem ...string) (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(append([]string{dir}, elem...)...), nil
}

// Read returns the contents of a file of the examples.
func Read(elem ...string) ([]byte, error) {
	p, err := Path(elem...)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}

// Objects reads every object of a multi-document YAML file of the examples.
func Objects(elem ...string) ([]*unstructured.Unstructured, error) {
	data, err := Read(elem...)
	if err != nil {
		return nil, err
	}
	objs, err := adaptertest.DecodeObjects(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(elem...), err)
	}
	return objs, nil
}

// Object reads a file of the examples that holds exactly one object.
func Object(elem ...string) (*unstructured.Unstructured, error) {
	objs, err := Objects(elem...)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s: want one object, got %d", filepath.Join(elem...), len(objs))
	}
	return objs[0], nil
}
