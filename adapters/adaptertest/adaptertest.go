// Package adaptertest holds what the adapters' tests and the webhook's tests share: loading pod
// and framework-object fixtures from YAML, and an in-memory adapters.ObjectReader.
package adaptertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/fairway-sched/fairway/adapters"
)

// LoadPod reads a pod from a YAML file, failing the test when it cannot.
func LoadPod(t testing.TB, path string) *corev1.Pod {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	pod := &corev1.Pod{}
	if err := yaml.UnmarshalStrict(data, pod); err != nil {
		t.Fatalf("decoding the pod in %s: %v", path, err)
	}
	return pod
}

// LoadObjects reads every object of a multi-document YAML file as unstructured objects.
func LoadObjects(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	objs, err := DecodeObjects(data)
	if err != nil {
		t.Fatalf("decoding %s: %v", path, err)
	}
	return objs
}

// DecodeObjects splits a multi-document YAML stream into unstructured objects, skipping empty
// documents.
func DecodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}

// Reader is an in-memory adapters.ObjectReader. Kinds listed in Installed (or of any object
// added) are served; other kinds answer adapters.ErrKindNotInstalled.
type Reader struct {
	Installed map[schema.GroupVersionKind]bool
	objects   map[string]*unstructured.Unstructured
}

var _ adapters.ObjectReader = (*Reader)(nil)

// NewReader returns a reader holding objs.
func NewReader(objs ...*unstructured.Unstructured) *Reader {
	r := &Reader{Installed: map[schema.GroupVersionKind]bool{}, objects: map[string]*unstructured.Unstructured{}}
	for _, o := range objs {
		r.Add(o)
	}
	return r
}

// Add stores obj and marks its kind installed.
func (r *Reader) Add(obj *unstructured.Unstructured) {
	gvk := obj.GroupVersionKind()
	r.Installed[gvk] = true
	r.objects[key(gvk, obj.GetNamespace(), obj.GetName())] = obj
}

// Get implements adapters.ObjectReader.
func (r *Reader) Get(_ context.Context, gvk schema.GroupVersionKind, namespace, name string) (*unstructured.Unstructured, error) {
	if !r.Installed[gvk] {
		return nil, fmt.Errorf("getting %s %s/%s: %w", gvk.Kind, namespace, name, adapters.ErrKindNotInstalled)
	}
	obj, ok := r.objects[key(gvk, namespace, name)]
	if !ok {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, name)
	}
	return obj.DeepCopy(), nil
}

func key(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.String() + "/" + namespace + "/" + name
}

// DescribeCase is a pod fixture of an adapter's testdata directory, the file of framework
// objects Describe may read ("" for none: their CRD missing), and what Describe must answer.
type DescribeCase struct {
	Pod, Objects string
	Want         adapters.Workload
	// Warnings is how many warnings Describe returns (their text is not compared).
	Warnings int
}

// RunDescribe checks, for each case, that a recognises the pod testdata/<Pod> and describes it
// as Want, reading the objects of testdata/<Objects>.
func RunDescribe(t *testing.T, a adapters.Adapter, cases map[string]DescribeCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			pod := LoadPod(t, filepath.Join("testdata", tc.Pod))
			reader := NewReader()
			if tc.Objects != "" {
				for _, o := range LoadObjects(t, filepath.Join("testdata", tc.Objects)) {
					reader.Add(o)
				}
			}
			if !a.Recognize(pod) {
				t.Fatalf("Recognize = false, want true")
			}
			got, err := a.Describe(context.Background(), pod, reader)
			if err != nil {
				t.Fatalf("Describe: %v", err)
			}
			if diff := cmp.Diff(tc.Want, got, cmpopts.IgnoreFields(adapters.Workload{}, "Warnings")); diff != "" {
				t.Errorf("Describe (-want +got):\n%s", diff)
			}
			if len(got.Warnings) != tc.Warnings {
				t.Errorf("warnings = %q, want %d", got.Warnings, tc.Warnings)
			}
		})
	}
}
