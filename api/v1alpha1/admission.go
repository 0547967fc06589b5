package v1alpha1

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// AdmittedAnnotation is the webhook's seal on a pod it admitted: a keyed digest (HMAC-SHA256,
// AdmissionKey) of the pod's namespace, scheduler name, GPU count and every fairway key the
// scheduler reads (the pod contract's user and admission keys). The webhook's failure policy
// for pods that name fairway's scheduler outside a served namespace, or opt out of the webhook,
// is Ignore, so a pod can reach the scheduler without the webhook having seen it, carrying
// whatever keys its author wrote; the scheduler places only pods whose seal it can check
// (VerifyAdmission), and an unsealed pod waits with ReasonNotAdmitted. Only the webhook and the
// scheduler hold the key (a Secret of fairway's namespace), so a tenant can copy a seal only
// from a pod of its own namespace with the same keys and GPU count, which buys nothing the
// webhook would not give it.
const AdmittedAnnotation = Prefix + "admitted"

// admissionSealVersion prefixes the seal, so the signed fields can change without an old seal
// being read as a new one.
const admissionSealVersion = "v1:"

// AdmissionKey is the secret the webhook seals admitted pods with and the scheduler checks seals
// with.
// +kubebuilder:object:generate=false
type AdmissionKey []byte

// MinAdmissionKeyBytes is the shortest key accepted.
const MinAdmissionKeyBytes = 32

// LoadAdmissionKey reads a key file (the chart mounts Secret fairway-admission-key); surrounding
// whitespace is not part of the key.
func LoadAdmissionKey(path string) (AdmissionKey, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the admission key: %w", err)
	}
	k := AdmissionKey(strings.TrimSpace(string(raw)))
	if len(k) < MinAdmissionKeyBytes {
		return nil, fmt.Errorf("admission key %s: %d bytes, at least %d needed", path, len(k), MinAdmissionKeyBytes)
	}
	return k, nil
}

// Seal is the AdmittedAnnotation value for pod as it is now.
func (k AdmissionKey) Seal(pod *corev1.Pod) string {
	return admissionSealVersion + base64.RawURLEncoding.EncodeToString(k.sum(pod))
}

// sum is the HMAC of pod's sealed fields.
func (k AdmissionKey) sum(pod *corev1.Pod) []byte {
	mac := hmac.New(sha256.New, k)
	_, _ = mac.Write(appendSealed(make([]byte, 0, 512), pod))
	return mac.Sum(nil)
}

// ErrNotAdmitted is wrapped by VerifyAdmission's errors.
var ErrNotAdmitted = errors.New("not admitted by fairway's webhook")

// VerifyAdmission checks pod's seal; the error says what is wrong, for the pod's reason.
func (k AdmissionKey) VerifyAdmission(pod *corev1.Pod) error {
	got, ok := pod.Annotations[AdmittedAnnotation]
	if !ok {
		return fmt.Errorf("%w: the pod has no %s annotation; it was created while the webhook was down or bypassed it (opted out, or in a namespace no queue serves): delete it and create it again", ErrNotAdmitted, AdmittedAnnotation)
	}
	mac, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(got, admissionSealVersion))
	if err != nil || !strings.HasPrefix(got, admissionSealVersion) || !hmac.Equal(mac, k.sum(pod)) {
		return fmt.Errorf("%w: annotation %s does not match the pod's fairway keys, namespace or GPU request; it was copied from another pod or the keys were written by hand: delete the pod and create it again", ErrNotAdmitted, AdmittedAnnotation)
	}
	return nil
}

// sealedLabels and sealedAnnotations are the keys the seal covers: everything the scheduler reads
// except the binding keys (written after admission, by fairway) and the seal itself.
var sealedLabels, sealedAnnotations = func() ([]string, []string) {
	var labels, annotations []string
	for _, k := range slices.Concat(PodLabelKeys, AliasLabelKeys) {
		if ClassOfPodLabel(k) != ClassBinding {
			labels = append(labels, k)
		}
	}
	for _, k := range slices.Concat(PodAnnotationKeys, AliasAnnotationKeys) {
		if ClassOfPodAnnotation(k) != ClassBinding && k != AdmittedAnnotation {
			annotations = append(annotations, k)
		}
	}
	slices.Sort(labels)
	slices.Sort(annotations)
	return labels, annotations
}()

// appendSealed appends the sealed fields to buf, each field ending in a zero byte (keys and
// values cannot hold one).
func appendSealed(buf []byte, pod *corev1.Pod) []byte {
	field := func(parts ...string) {
		for _, p := range parts {
			buf = append(buf, p...)
		}
		buf = append(buf, 0)
	}
	field(admissionSealVersion, pod.Namespace)
	field("scheduler=", pod.Spec.SchedulerName)
	for _, k := range sealedLabels {
		if v, ok := pod.Labels[k]; ok {
			field("label ", k, "=", v)
		}
	}
	for _, k := range sealedAnnotations {
		if v, ok := pod.Annotations[k]; ok {
			field("annotation ", k, "=", v)
		}
	}
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			if q, ok := c.Resources.Limits[ResourceGPU]; ok {
				field("gpu ", c.Name, "=", q.String())
			}
		}
	}
	return buf
}
