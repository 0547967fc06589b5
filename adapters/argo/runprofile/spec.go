package runprofile

import (
	"encoding/json"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The parts of Argo's Workflow spec (argoproj.io/v1alpha1, v3.6 and v3.7) the profile reads.
// fairway does not import Argo's Go module (see adapters.ObjectReader); these mirror its JSON.

type workflowSpec struct {
	Entrypoint           string              `json:"entrypoint"`
	OnExit               string              `json:"onExit"`
	Arguments            arguments           `json:"arguments"`
	Parallelism          *int64              `json:"parallelism"`
	PodMetadata          metadata            `json:"podMetadata"`
	NodeSelector         map[string]string   `json:"nodeSelector"`
	Tolerations          []corev1.Toleration `json:"tolerations"`
	Affinity             *corev1.Affinity    `json:"affinity"`
	PodPriorityClassName string              `json:"podPriorityClassName"`
	SchedulerName        string              `json:"schedulerName"`
	PodSpecPatch         string              `json:"podSpecPatch"`
	WorkflowTemplateRef  *struct {
		Name string `json:"name"`
	} `json:"workflowTemplateRef"`
}

type metadata struct {
	Annotations map[string]string `json:"annotations"`
	Labels      map[string]string `json:"labels"`
}

type arguments struct {
	Parameters []parameter `json:"parameters"`
}

// parameter is an input or argument parameter. Argo accepts numbers and booleans for value and
// default (its AnyString), so both are read as any scalar.
type parameter struct {
	Name    string     `json:"name"`
	Value   *anyString `json:"value"`
	Default *anyString `json:"default"`
}

type anyString string

func (a *anyString) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*a = anyString(s)
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		*a = anyString(strconv.FormatFloat(v, 'f', -1, 64))
	case bool:
		*a = anyString(strconv.FormatBool(v))
	case nil:
		*a = ""
	default:
		*a = anyString(b)
	}
	return nil
}

// template is one of the workflow's templates, its parameters substituted where they are known.
type template struct {
	Name         string              `json:"name"`
	Inputs       arguments           `json:"inputs"`
	Metadata     metadata            `json:"metadata"`
	Container    *corev1.Container   `json:"container"`
	Script       *corev1.Container   `json:"script"` // plus source, which does not matter here
	ContainerSet *containerSet       `json:"containerSet"`
	Resource     json.RawMessage     `json:"resource"`
	Data         json.RawMessage     `json:"data"`
	Suspend      json.RawMessage     `json:"suspend"`
	HTTP         json.RawMessage     `json:"http"`
	Plugin       json.RawMessage     `json:"plugin"`
	DAG          *dagTemplate        `json:"dag"`
	Steps        [][]task            `json:"steps"`
	InitCtrs     []corev1.Container  `json:"initContainers"`
	Sidecars     []corev1.Container  `json:"sidecars"`
	NodeSelector map[string]string   `json:"nodeSelector"`
	Tolerations  []corev1.Toleration `json:"tolerations"`
	Affinity     *corev1.Affinity    `json:"affinity"`
	Priority     string              `json:"priorityClassName"`
	Scheduler    string              `json:"schedulerName"`
	PodSpecPatch string              `json:"podSpecPatch"`
	Parallelism  *intstr.IntOrString `json:"parallelism"`
}

type containerSet struct {
	Containers []corev1.Container `json:"containers"`
}

type dagTemplate struct {
	Tasks []task `json:"tasks"`
}

// task is a DAG task or a step: they share these fields.
type task struct {
	Name         string          `json:"name"`
	Template     string          `json:"template"`
	TemplateRef  json.RawMessage `json:"templateRef"`
	Inline       json.RawMessage `json:"inline"`
	Arguments    arguments       `json:"arguments"`
	Dependencies []string        `json:"dependencies"`
	Depends      string          `json:"depends"`
	When         string          `json:"when"`
	WithItems    []any           `json:"withItems"`
	WithParam    string          `json:"withParam"`
	WithSequence *sequence       `json:"withSequence"`
	OnExit       string          `json:"onExit"`
	Hooks        map[string]hook `json:"hooks"`
}

type sequence struct {
	Count *intstr.IntOrString `json:"count"`
	Start *intstr.IntOrString `json:"start"`
	End   *intstr.IntOrString `json:"end"`
}

type hook struct {
	Template   string    `json:"template"`
	Arguments  arguments `json:"arguments"`
	Expression string    `json:"expression"`
}

// decode turns a generic JSON tree into v.
func decode(tree any, v any) error {
	b, err := json.Marshal(tree)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// intOf reads an IntOrString whose string form is a number; ok is false otherwise (an
// unresolved expression).
func intOf(v *intstr.IntOrString) (int64, bool) {
	if v == nil {
		return 0, false
	}
	if v.Type == intstr.Int {
		return int64(v.IntVal), true
	}
	n, err := strconv.ParseInt(v.StrVal, 10, 64)
	return n, err == nil
}

func (p parameter) String() string {
	if p.Value != nil {
		return fmt.Sprintf("%s=%q", p.Name, string(*p.Value))
	}
	return p.Name
}
