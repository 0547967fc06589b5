//go:build e2e

package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/testutil"
	"github.com/fairway-sched/fairway/test/cluster"
)

// TestCRDsApplyAsGenerated: the CRDs in charts/fairway/crds, exactly as controller-gen wrote them,
// are accepted by the real API server with every CEL rule (x-kubernetes-validations) kept, and
// the rules are enforced: a Queue whose GPU-type limit is below its quota is refused on the
// rule's field. Every e2e cluster applies these files (cluster.StartT); nothing strips a rule
// the API server would refuse.
func TestCRDsApplyAsGenerated(t *testing.T) {
	t.Parallel()
	c := cluster.StartT(t, cluster.Config{SkipCRDs: true})
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "charts", "fairway", "crds")
	if err := c.ApplyCRDs(t.Context(), dir); err != nil {
		t.Fatalf("the API server refuses the generated CRDs: %v", err)
	}

	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in %s (%v)", dir, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var generated apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(data, &generated); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// Read back untyped: the cluster's client has no apiextensions types in its scheme.
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		if err := c.Client().Get(t.Context(), client.ObjectKey{Name: generated.Name}, u); err != nil {
			t.Fatalf("reading CRD %s back: %v", generated.Name, err)
		}
		var stored apiextensionsv1.CustomResourceDefinition
		if err := apiruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &stored); err != nil {
			t.Fatalf("decoding CRD %s: %v", generated.Name, err)
		}
		want, got := celRules(&generated), celRules(&stored)
		if len(want) == 0 && generated.Spec.Group == fairwayv1.GroupVersion.Group && generated.Spec.Names.Kind == "Queue" {
			t.Fatalf("%s has no CEL rules: this test would prove nothing", f)
		}
		if !slices.Equal(want, got) {
			t.Errorf("CRD %s: the API server keeps CEL rules %q, the generated file has %q", generated.Name, got, want)
		}
		t.Logf("CRD %s: the API server kept all %d CEL rules", generated.Name, len(got))
	}

	// The rules are live: the limit-at-least-quota rule refuses this Queue, on its field.
	bad := testutil.MakeQueue("limit-below-quota").GPUType("H100", "2", 1, "1").Obj()
	bad.CreationTimestamp = metav1.Time{}
	err = c.Client().Create(t.Context(), bad)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating a Queue whose H100 limit (1) is below its quota (2): %v, want Invalid", err)
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) || st.Status().Details == nil ||
		!slices.ContainsFunc(st.Status().Details.Causes, func(c metav1.StatusCause) bool { return c.Field == "spec.gpuTypes[0].limit" }) {
		t.Errorf("the refusal does not name spec.gpuTypes[0].limit: %v", err)
	}
	good := testutil.MakeQueue("limit-above-quota").GPUType("H100", "1", 1, "2").Obj()
	good.CreationTimestamp = metav1.Time{}
	if err := c.Client().Create(t.Context(), good); err != nil {
		t.Errorf("creating a valid Queue: %v", err)
	}
}

// celRules lists every CEL rule of crd's schemas, as "version path: rule", in a stable order.
func celRules(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var out []string
	var walk func(path string, s *apiextensionsv1.JSONSchemaProps)
	walk = func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		for _, r := range s.XValidations {
			out = append(out, path+": "+r.Rule)
		}
		for name, p := range s.Properties {
			walk(path+"."+name, &p)
		}
		if s.Items != nil {
			walk(path+"[]", s.Items.Schema)
		}
		if s.AdditionalProperties != nil {
			walk(path+"{}", s.AdditionalProperties.Schema)
		}
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil {
			walk(v.Name, v.Schema.OpenAPIV3Schema)
		}
	}
	slices.Sort(out)
	return out
}
