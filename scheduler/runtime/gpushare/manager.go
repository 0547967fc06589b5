package gpushare

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/fairway-sched/fairway/api/v1alpha1"
	"github.com/fairway-sched/fairway/scheduler/snapshot"
)

// Sentinel errors.
var (
	// ErrNoGPUReported: no gpu-agent reported which GPU the kubelet gave a reservation in time.
	ErrNoGPUReported = errors.New("no GPU reported for the reservation")
)

// Options configure a Manager.
type Options struct {
	// Namespace holds the reservation pods (fairway's own namespace).
	Namespace string
	// Image of the reservation pods' one container; it only has to sleep (pause).
	Image string
	// PriorityClassName of the reservation pods, high enough that nothing preempts them.
	PriorityClassName string
	// Timeout bounds the wait for the gpu-agent's report of a new reservation's GPU.
	Timeout time.Duration
	// Poll is how often the reservation is looked up in the cache while waiting. 20ms when 0.
	Poll time.Duration
	// Settle is how long after a reservation's create failed the Manager looks whether the API
	// server created it all the same (its answer lost or late); at least the writes'
	// server-side deadline. 5s when 0.
	Settle time.Duration
	Log    logr.Logger
}

// PodReader reads pods from the informer cache (fairway's pods; reservations are among them).
type PodReader interface {
	Pod(namespace, name string) *corev1.Pod
}

// Manager creates and deletes reservation pods. See the package documentation.
type Manager struct {
	client kubernetes.Interface
	pods   PodReader
	opts   Options

	mu    sync.Mutex
	slots map[SlotKey]*slotState

	releases chan release
}

type slotState struct {
	lock     chan struct{} // a mutex that waits on a context
	inflight int           // Acquires not yet Done
	gen      uint64        // bumped by every Acquire
}

type release struct {
	key  SlotKey
	name string
	uid  types.UID
	gen  uint64
}

// New returns a manager that writes through cs and reads reservation pods from pods.
func New(cs kubernetes.Interface, pods PodReader, opts Options) *Manager {
	if opts.Settle <= 0 {
		opts.Settle = 5 * time.Second
	}
	if opts.Poll == 0 {
		opts.Poll = 20 * time.Millisecond
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Minute
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	return &Manager{client: cs, pods: pods, opts: opts, slots: map[SlotKey]*slotState{}, releases: make(chan release, 1024)}
}

func (m *Manager) state(k SlotKey) *slotState {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.slots[k]
	if st == nil {
		st = &slotState{lock: make(chan struct{}, 1)}
		m.slots[k] = st
	}
	return st
}

func (st *slotState) acquire(ctx context.Context) error {
	select {
	case st.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *slotState) unlock() { <-st.lock }

// Generation returns a counter that every Acquire of the slot bumps. The loop reads it when it
// decides a release, and Release refuses to act on a decision older than the last Acquire.
func (m *Manager) Generation(k SlotKey) uint64 {
	st := m.state(k)
	m.mu.Lock()
	defer m.mu.Unlock()
	return st.gen
}

// Grant is a slot's reservation as the binder uses it.
type Grant struct {
	// UUID is the GPU the kubelet gave the reservation, as the gpu-agent reported it.
	UUID string
	// Group is the fairway.dev/gpu-group label value.
	Group       string
	Reservation types.NamespacedName
	ReservedUID types.UID
}

// Acquire makes sure a reservation pod holds the slot and returns the GPU it got. Until done is
// called the slot is not released, whatever the loop decides. On error nothing is held.
func (m *Manager) Acquire(ctx context.Context, k SlotKey) (g Grant, done func(), err error) {
	st := m.state(k)
	if err := st.acquire(ctx); err != nil {
		return Grant{}, nil, err
	}
	m.mu.Lock()
	st.inflight++
	st.gen++
	m.mu.Unlock()
	releaseHold := func() {
		m.mu.Lock()
		st.inflight--
		m.mu.Unlock()
	}
	defer st.unlock()
	g, err = m.ensure(ctx, k)
	if err != nil {
		releaseHold()
		return Grant{}, nil, err
	}
	var once sync.Once
	return g, func() { once.Do(releaseHold) }, nil
}

// ensure creates the reservation if needed (waiting out one that is terminating) and waits for
// its GPU.
func (m *Manager) ensure(ctx context.Context, k SlotKey) (Grant, error) {
	name := ReservationName(k)
	key := types.NamespacedName{Namespace: m.opts.Namespace, Name: name}
	deadline := time.Now().Add(m.opts.Timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var cur *corev1.Pod
	for cur == nil {
		cur = m.pods.Pod(key.Namespace, key.Name)
		if cur != nil && (cur.DeletionTimestamp != nil || cur.Spec.NodeName != k.Node) {
			if err := m.waitGone(ctx, key, cur.UID); err != nil {
				return Grant{}, err
			}
			cur = nil
			continue
		}
		if cur != nil {
			break
		}
		created, err := m.client.CoreV1().Pods(key.Namespace).Create(ctx, m.reservationPod(k), metav1.CreateOptions{})
		switch {
		case err == nil:
			m.opts.Log.V(2).Info("Created a reservation pod", "pod", klog.KObj(created), "node", k.Node, "slot", k.Slot)
			cur = created
		case apierrors.IsAlreadyExists(err):
			// The cache is behind: read it from the API server.
			got, gerr := m.client.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			if gerr != nil {
				if apierrors.IsNotFound(gerr) {
					continue
				}
				return Grant{}, fmt.Errorf("reading reservation %s: %w", key, gerr)
			}
			if got.DeletionTimestamp != nil || got.Spec.NodeName != k.Node {
				if err := m.waitGone(ctx, key, got.UID); err != nil {
					return Grant{}, err
				}
				continue
			}
			cur = got
		default:
			// The answer may have been lost while the API server created the pod: a reservation
			// the snapshot counts once it sees it. Given up now, the slot's pod would be forgotten
			// and the slot planned again under it; look once the create can no longer land.
			got, ok := m.landed(ctx, key, k.Node)
			if !ok {
				return Grant{}, fmt.Errorf("creating reservation %s on node %s: %w", key, k.Node, err)
			}
			cur = got
		}
	}
	uid := cur.UID
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		if uuid := cur.Annotations[v1alpha1.GPUUUIDAnnotation]; uuid != "" {
			return Grant{UUID: uuid, Group: GroupID(k), Reservation: key, ReservedUID: uid}, nil
		}
		select {
		case <-ctx.Done():
			return Grant{}, fmt.Errorf("%w: reservation %s on node %s waited %v for the gpu-agent to report the GPU the kubelet gave it: %w",
				ErrNoGPUReported, key, k.Node, m.opts.Timeout, ctx.Err())
		case <-t.C:
		}
		if p := m.pods.Pod(key.Namespace, key.Name); p != nil && p.UID == uid {
			if p.DeletionTimestamp != nil {
				return Grant{}, fmt.Errorf("reservation %s was deleted while a pod was being bound to it", key)
			}
			cur = p
		}
	}
}

// landed waits Options.Settle, then reads reservation key from the API server: the pod, when a
// create whose answer was lost made it (on node, not terminating).
func (m *Manager) landed(ctx context.Context, key types.NamespacedName, node string) (*corev1.Pod, bool) {
	t := time.NewTimer(m.opts.Settle)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, false
	case <-t.C:
	}
	got, err := m.client.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp != nil || got.Spec.NodeName != node {
		return nil, false
	}
	m.opts.Log.Info("A reservation whose create failed was created", "pod", klog.KObj(got), "node", node)
	return got, true
}

// waitGone waits until the pod with uid no longer exists under key.
func (m *Manager) waitGone(ctx context.Context, key types.NamespacedName, uid types.UID) error {
	t := time.NewTicker(m.opts.Poll)
	defer t.Stop()
	for {
		p := m.pods.Pod(key.Namespace, key.Name)
		if p == nil || p.UID != uid {
			got, err := m.client.CoreV1().Pods(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) || (err == nil && got.UID != uid) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the old reservation %s to go: %w", key, ctx.Err())
		case <-t.C:
		}
	}
}

// reservationPod is the pod that holds slot k's GPU for the kubelet.
func (m *Manager) reservationPod(k SlotKey) *corev1.Pod {
	gpu := resource.MustParse("1")
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      ReservationName(k),
			Namespace: m.opts.Namespace,
			Labels: map[string]string{
				v1alpha1.ReservationLabel:     "true",
				v1alpha1.GPUGroupLabel:        GroupID(k),
				v1alpha1.ManagedByLabel:       v1alpha1.ManagedByValue,
				"app.kubernetes.io/component": "gpu-reservation",
			},
			Annotations: map[string]string{snapshot.ReservationSlotAnnotation: strconv.Itoa(k.Slot)},
		},
		Spec: corev1.PodSpec{
			NodeName:                      k.Node,
			SchedulerName:                 v1alpha1.SchedulerName,
			PriorityClassName:             m.opts.PriorityClassName,
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			AutomountServiceAccountToken:  ptr.To(false),
			EnableServiceLinks:            ptr.To(false),
			Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name:  "reservation",
				Image: m.opts.Image,
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{v1alpha1.ResourceGPU: gpu, corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("8Mi")},
					Limits:   corev1.ResourceList{v1alpha1.ResourceGPU: gpu, corev1.ResourceMemory: resource.MustParse("32Mi")},
				},
			}},
		},
	}
}

// RequestRelease asks for the reservation pod name (uid) of slot k to be deleted, unless an
// Acquire of the slot happened after the loop read gen (Generation) or is still in flight. It
// never blocks; the work is done by Start.
func (m *Manager) RequestRelease(k SlotKey, name string, uid types.UID, gen uint64) {
	select {
	case m.releases <- release{key: k, name: name, uid: uid, gen: gen}:
	default:
		// Full: the loop asks again at a later cycle.
	}
}

// NeedLeaderElection is true: only the leader deletes reservations.
func (m *Manager) NeedLeaderElection() bool { return true }

// Start deletes the reservations the loop asks for until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case r := <-m.releases:
			if _, err := m.Release(ctx, r.key, r.name, r.uid, r.gen); err != nil && ctx.Err() == nil {
				m.opts.Log.Error(err, "Releasing a GPU reservation", "node", r.key.Node, "slot", r.key.Slot)
			}
		}
	}
}

// Release deletes reservation pod name (uid) of slot k now, unless the slot is held or was
// acquired after gen. It reports whether it deleted. name is normally ReservationName(k); a
// reservation whose slot is unknown (Slot -1) is released by its name.
func (m *Manager) Release(ctx context.Context, k SlotKey, name string, uid types.UID, gen uint64) (bool, error) {
	st := m.state(k)
	if err := st.acquire(ctx); err != nil {
		return false, err
	}
	defer st.unlock()
	m.mu.Lock()
	busy := st.inflight > 0 || st.gen != gen
	m.mu.Unlock()
	if busy {
		return false, nil
	}
	err := m.client.CoreV1().Pods(m.opts.Namespace).Delete(ctx, name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	switch {
	case err == nil:
		m.opts.Log.V(2).Info("Released a GPU reservation", "pod", klog.KRef(m.opts.Namespace, name), "node", k.Node, "slot", k.Slot)
		return true, nil
	case apierrors.IsNotFound(err), apierrors.IsConflict(err):
		return false, nil // gone already, or a newer reservation holds the name
	}
	return false, fmt.Errorf("deleting reservation %s/%s: %w", m.opts.Namespace, name, err)
}

// Forget drops the bookkeeping of a slot that has no reservation and no Acquire in flight (the
// loop calls it when a node goes away), so the map does not grow with churned nodes.
func (m *Manager) Forget(k SlotKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st := m.slots[k]; st != nil && st.inflight == 0 && len(st.lock) == 0 {
		delete(m.slots, k)
	}
}
