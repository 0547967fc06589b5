package mutatingwebhook

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/fairway-sched/fairway/api/gpurequest"
	fairwayv1 "github.com/fairway-sched/fairway/api/v1alpha1"
)

// unknownKeys checks a pod's labels and annotations against the keys fairway knows
// (fairwayv1.PodLabelKeys and the other lists of api/v1alpha1/knownkeys.go). A misspelt key
// (fairway.dev/gpu-fracton) is otherwise admitted silently, and the pod runs without the GPU
// share its author asked for; the newcomer learns it only from a slow notebook.
//
// It returns one warning per unknown fairway.dev/ key, per near-miss of a Run:ai/KAI alias and
// per key put in the wrong map (labels for annotations), naming the key meant. It refuses the pod
// with the same messages when the pod asks fairway for a GPU share, or meant to (an unknown key's
// closest known key is a GPU-share key): a share placed while one of its keys is misspelt (say
// fairway.dev/gpu-containr) would go to the wrong container, and a notebook's spawner shows no
// warnings, only refusals.
func unknownKeys(pod *corev1.Pod) ([]string, error) {
	var msgs []string
	meantShare := false
	check := func(m map[string]string, what string, keys, aliases, otherMap []string, otherWhat string) {
		for _, k := range sortedKeys(m) {
			if slices.Contains(keys, k) || slices.Contains(aliases, k) {
				continue
			}
			switch {
			case slices.Contains(otherMap, k):
				msgs = append(msgs, fmt.Sprintf("fairway: %s is %s, not %s: fairway does not read it here; move it to metadata.%ss", k, article(otherWhat), article(what), otherWhat))
			case strings.HasPrefix(k, fairwayv1.Prefix):
				if where, ok := fairwayv1.OtherKeys[k]; ok {
					msgs = append(msgs, fmt.Sprintf("fairway: %s %s is %s; on a pod it does nothing", what, k, where))
					continue
				}
				msg := fmt.Sprintf("fairway: unknown %s key %s", what, k)
				if near := closestKey(k, keys); near != "" {
					msg += fmt.Sprintf("; did you mean %s?", near)
					meantShare = meantShare || slices.Contains(fairwayv1.GPUShareKeys, near)
				} else {
					msg += ": fairway neither reads nor writes it"
				}
				msgs = append(msgs, msg)
			default:
				if near := nearAlias(k, aliases); near != "" {
					msgs = append(msgs, fmt.Sprintf("fairway: unknown %s key %s; did you mean %s?", what, k, near))
				}
			}
		}
	}
	check(pod.Labels, "label", fairwayv1.PodLabelKeys, fairwayv1.AliasLabelKeys,
		append(slices.Clone(fairwayv1.PodAnnotationKeys), fairwayv1.AliasAnnotationKeys...), "annotation")
	check(pod.Annotations, "annotation", fairwayv1.PodAnnotationKeys, fairwayv1.AliasAnnotationKeys,
		append(slices.Clone(fairwayv1.PodLabelKeys), fairwayv1.AliasLabelKeys...), "label")
	if len(msgs) == 0 {
		return nil, nil
	}
	share, err := gpurequest.Parse(pod.Annotations)
	if meantShare || err != nil || !share.IsZero() {
		return nil, deny("%s (refused: the pod asks fairway for a GPU share, which a misspelt key would lose or misplace)",
			strings.Join(trimFairway(msgs), "; "))
	}
	return msgs, nil
}

// closestKey is the key of known nearest to key, if it is near enough to be a typo of it: an
// edit distance (insertions, deletions, substitutions, swaps of neighbours) of at most a third of
// the known key's name after the prefix, and at least 1. "" when none is.
func closestKey(key string, known []string) string {
	best, bestDist := "", 0
	for _, k := range known {
		limit := max(1, len(strings.TrimPrefix(k, fairwayv1.Prefix))/3)
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = k, d
		}
	}
	return best
}

// nearAlias is the Run:ai/KAI key that key misspells, or "". Other tools' keys have no prefix to
// tell them apart, so only a change of case, one edit (two for keys of 12 bytes or more) and the
// same first letter count: cpu-memory is not a typo of gpu-memory. Such a key gets a warning,
// never a refusal unless the pod asks for a GPU share.
func nearAlias(key string, aliases []string) string {
	lower := strings.ToLower(key)
	for _, a := range aliases {
		limit := 1
		if len(a) >= 12 {
			limit = 2
		}
		if key != "" && key != a && lower[:1] == a[:1] && editDistance(lower, a) <= limit {
			return a
		}
	}
	return ""
}

// editDistance is the optimal-string-alignment distance of a and b: the fewest insertions,
// deletions, substitutions and swaps of adjacent bytes that turn a into b.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func article(what string) string {
	if strings.IndexAny(what[:1], "aeiou") == 0 {
		return "an " + what
	}
	return "a " + what
}

// trimFairway drops the "fairway: " of warnings joined into one refusal, which the API server
// already prefixes with the webhook's name.
func trimFairway(msgs []string) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = strings.TrimPrefix(m, "fairway: ")
	}
	return out
}
