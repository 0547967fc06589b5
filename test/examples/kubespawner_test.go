package examples_test

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/adapters"
	"github.com/fairway-sched/fairway/adapters/adaptertest"
	"github.com/fairway-sched/fairway/adapters/jupyterhub"
	"github.com/fairway-sched/fairway/adapters/registry"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/test/cluster"
	"github.com/fairway-sched/fairway/test/examples"
)

func loadValues(t *testing.T) *examples.Z2JHValues {
	t.Helper()
	data, err := examples.Read("jupyterhub", "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	v, err := examples.ParseZ2JHValues(data)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestNotebookProfiles renders each profile of values.yaml into the pod KubeSpawner makes and
// checks what fairway reads from it: a quarter and a half of a GPU by annotation, a whole GPU by
// resource limit, the user-scheduler name fairway takes over, and a pod the JupyterHub adapter
// claims (and no other adapter before it) with the GPU share on the notebook container.
func TestNotebookProfiles(t *testing.T) {
	v := loadValues(t)
	if ptr.Deref(v.Scheduling.UserPlaceholder.Enabled, true) {
		t.Error("values.yaml should disable the user placeholders")
	}
	cases := []struct {
		profile  string
		fraction string
		gpus     int64
	}{
		{"gpu-quarter", "0.25", 0},
		{"gpu-half", "0.5", 0},
		{"gpu-whole", "", 1},
	}
	if got := len(v.Singleuser.ProfileList); got != len(cases) {
		t.Errorf("values.yaml has %d profiles, the test knows %d", got, len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.profile, func(t *testing.T) {
			pod, err := examples.RenderNotebook(v, examples.NotebookOptions{Release: "jhub", Namespace: "jhub", User: "alice", Profile: tc.profile})
			if err != nil {
				t.Fatal(err)
			}
			if pod.Name != "jupyter-alice" || pod.Spec.SchedulerName != "jhub-user-scheduler" {
				t.Errorf("pod %s, scheduler %q", pod.Name, pod.Spec.SchedulerName)
			}
			if got := pod.Annotations[fairwayv1.GPUFractionAnnotation]; got != tc.fraction {
				t.Errorf("%s = %q, want %q", fairwayv1.GPUFractionAnnotation, got, tc.fraction)
			}
			gpus := pod.Spec.Containers[0].Resources.Limits[fairwayv1.ResourceGPU]
			if gpus.Value() != tc.gpus {
				t.Errorf("%s limit %s, want %d", fairwayv1.ResourceGPU, gpus.String(), tc.gpus)
			}
			var claimed adapters.Adapter
			for _, a := range registry.All() {
				if a.Recognize(pod) {
					claimed = a
					break
				}
			}
			if claimed == nil || claimed.Name() != jupyterhub.Name {
				t.Fatalf("the pod is claimed by %v, want the %s adapter", claimed, jupyterhub.Name)
			}
			w, err := claimed.Describe(t.Context(), pod, adaptertest.NewReader())
			if err != nil {
				t.Fatal(err)
			}
			if w.Kind != adapters.KindNotebook || w.GPUContainer != jupyterhub.NotebookContainer || w.PriorityClass != fairwayv1.PriorityClassInteractive {
				t.Errorf("workload %+v", w)
			}
		})
	}
	if _, err := examples.RenderNotebook(v, examples.NotebookOptions{Release: "jhub", User: "bob", Profile: "nope"}); err == nil {
		t.Error("an unknown profile rendered")
	}
	def, err := examples.RenderNotebook(v, examples.NotebookOptions{Release: "jhub", User: "bob"})
	if err != nil || def.Annotations[fairwayv1.GPUFractionAnnotation] != "0.25" {
		t.Errorf("the default profile should be the quarter GPU: %v %v", def.Annotations, err)
	}
}

// TestNotebookMatchesAdapterFixture: the rendered pod has the shape of the JupyterHub adapter's
// z2jh fixture, written independently from KubeSpawner's source: the same labels, the same
// KubeSpawner annotations, tolerations, affinity, containers and restart policy.
func TestNotebookMatchesAdapterFixture(t *testing.T) {
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	fixture := adaptertest.LoadPod(t, filepath.Join(root, "adapters", "jupyterhub", "testdata", "z2jh-notebook.yaml"))
	v := loadValues(t)
	pod, err := examples.RenderNotebook(v, examples.NotebookOptions{Release: "jhub", Namespace: "jhub", User: "alice", ServerName: "gpu", Profile: "gpu-quarter"})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Name != fixture.Name {
		t.Errorf("name %s, fixture %s", pod.Name, fixture.Name)
	}
	if diff := cmp.Diff(fixture.Labels, pod.Labels); diff != "" {
		t.Errorf("labels of the fixture (-) and rendered (+):\n%s", diff)
	}
	for _, k := range slices.Sorted(maps.Keys(fixture.Annotations)) {
		if k == "gpu-fraction" {
			continue // the fixture's profile asks by the Run:ai key, the example by fairway's
		}
		if pod.Annotations[k] != fixture.Annotations[k] {
			t.Errorf("annotation %s = %q, fixture %q", k, pod.Annotations[k], fixture.Annotations[k])
		}
	}
	for name, pair := range map[string][2]any{
		"schedulerName":  {fixture.Spec.SchedulerName, pod.Spec.SchedulerName},
		"restartPolicy":  {fixture.Spec.RestartPolicy, pod.Spec.RestartPolicy},
		"tolerations":    {fixture.Spec.Tolerations, pod.Spec.Tolerations},
		"affinity":       {fixture.Spec.Affinity, pod.Spec.Affinity},
		"initContainers": {names(fixture.Spec.InitContainers), names(pod.Spec.InitContainers)},
		"containers":     {names(fixture.Spec.Containers), names(pod.Spec.Containers)},
		"volumes":        {fixture.Spec.Volumes, pod.Spec.Volumes},
	} {
		if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
			t.Errorf("%s of the fixture (-) and rendered (+):\n%s", name, diff)
		}
	}
}

func names(cs []corev1.Container) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Name)
	}
	return out
}
