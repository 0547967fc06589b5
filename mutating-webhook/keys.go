package mutatingwebhook

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// unknownKeys checks a pod's labels and annotations against the keys fairway knows
// (fairwayv1.PodKeyProblems). A misspelt key (fairway.dev/gpu-fracton) is otherwise admitted
// silently, and the pod runs without the GPU share its author asked for; the newcomer learns it
// only from a slow notebook.
//
// It returns one warning per problem, naming the key meant. It refuses the pod with the same
// messages when the pod asks fairway for a GPU share, or meant to (a misspelt key is nearest a
// GPU-share key): a share placed while one of its keys is misspelt (fairway.dev/gpu-containr)
// would go to the wrong container, and a notebook's spawner, like every controller, shows no
// warnings of the pods it creates, only refusals.
func unknownKeys(pod *corev1.Pod) ([]string, error) {
	problems := fairwayv1.PodKeyProblems(pod.Labels, pod.Annotations)
	if len(problems) == 0 {
		return nil, nil
	}
	msgs := make([]string, len(problems))
	meantShare := false
	for i, p := range problems {
		msgs[i] = p.Message
		meantShare = meantShare || slices.Contains(fairwayv1.GPUShareKeys, p.Meant)
	}
	share, err := gpurequest.Parse(pod.Annotations)
	if meantShare || err != nil || !share.IsZero() {
		return nil, deny("%s (refused: the pod asks fairway for a GPU share, which a misspelt key would lose or misplace)", strings.Join(msgs, "; "))
	}
	for i := range msgs {
		msgs[i] = "fairway: " + msgs[i]
	}
	return msgs, nil
}
