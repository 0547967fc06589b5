package v1alpha1

import "fmt"

// QueueLabels returns the labels that name a queue, on a pod or on the framework object that
// made it, in the order QueueOf prefers them: fairway's own, then Run:ai's, then KAI's.
func QueueLabels() []string { return []string{QueueLabel, RunAIQueueLabel, KAIQueueLabel} }

// QueueOf is the one rule by which every component reads the queue that labels name: fairway's
// QueueLabel, else the Run:ai alias, else the KAI alias, so that manifests written for those
// schedulers work unchanged. An empty value counts as not set (an empty queue name names no
// queue, and templating tools write "" for "none"). When two of the labels are set to
// different queues, QueueOf returns the preferred one with a *QueueConflictError; the webhook
// denies such a pod, the scheduler reports it as the pod's problem, and readers that only
// display or group pods use the queue it returns. key is the label the queue was read from, ""
// when none names one. It does not allocate unless the labels disagree.
func QueueOf(labels map[string]string) (key, queue string, err error) {
	for _, k := range [...]string{QueueLabel, RunAIQueueLabel, KAIQueueLabel} {
		v := labels[k]
		switch {
		case v == "":
		case key == "":
			key, queue = k, v
		case v != queue && err == nil:
			err = &QueueConflictError{Key: key, Queue: queue, OtherKey: k, OtherQueue: v}
		}
	}
	return key, queue, err
}

// QueueConflictError is labels naming two different queues.
// +kubebuilder:object:generate=false
type QueueConflictError struct {
	Key, Queue           string
	OtherKey, OtherQueue string
}

func (e *QueueConflictError) Error() string {
	return fmt.Sprintf("%s %q and %s %q: the labels name different queues; set one", e.Key, e.Queue, e.OtherKey, e.OtherQueue)
}
