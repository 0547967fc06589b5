package binder

import (
	"context"
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// ClaimConflict names another claim that holds one of an allocation's devices, or returns ""
// (the informers' view, checked just before the allocation is written: the engine's snapshot may
// be a cycle old, and another scheduler may have allocated the device since).
type ClaimConflict func(alloc *resourceapi.AllocationResult, claim *resourceapi.ResourceClaim) string

// errClaim is a claim the binding cannot use (gone, replaced, allocated elsewhere).
var errClaim = errors.New("resource claim")

// reserveClaims makes the engine's DRA decision true before the pod is bound, as kube-scheduler's
// DynamicResources plugin does in PreBind: each claim the engine allocated gets
// kube-controller-manager's finalizer (resource.kubernetes.io/delete-protection, which makes
// its resourceclaim controller deallocate the claim once no pod uses it any more), then its
// allocation and the pod in status.reservedFor in one status update; a claim already allocated
// gets the pod added to reservedFor. It returns the claims it allocated, for release on failure.
func (b *Binder) reserveClaims(ctx context.Context, r *Request) (allocated []*resourceapi.ResourceClaim, err error) {
	claims := b.client.ResourceV1().ResourceClaims(r.Pod.Namespace)
	consumer := resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: r.Pod.Name, UID: r.UID}
	for _, ca := range r.Claims {
		var done *resourceapi.ResourceClaim
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := claims.Get(ctx, ca.Claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			switch {
			case c.UID != ca.UID:
				return fmt.Errorf("%w %s was replaced", errClaim, ca.Claim)
			case c.DeletionTimestamp != nil:
				return fmt.Errorf("%w %s is being deleted", errClaim, ca.Claim)
			}
			if ca.Result != nil && c.Status.Allocation == nil {
				if b.opts.ClaimConflict != nil {
					if other := b.opts.ClaimConflict(ca.Result, c); other != "" {
						return fmt.Errorf("%w %s: its device went to claim %s in the meantime", errClaim, ca.Claim, other)
					}
				}
				if !slices.Contains(c.Finalizers, resourceapi.Finalizer) {
					c.Finalizers = append(c.Finalizers, resourceapi.Finalizer)
					if c, err = claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
						return err
					}
				}
				c.Status.Allocation = ca.Result
			} else if ca.Result != nil && !equality.Semantic.DeepEqual(c.Status.Allocation, ca.Result) {
				return fmt.Errorf("%w %s was allocated elsewhere in the meantime", errClaim, ca.Claim)
			} else if c.Status.Allocation == nil {
				return fmt.Errorf("%w %s was deallocated in the meantime", errClaim, ca.Claim)
			}
			if !slices.ContainsFunc(c.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == r.UID }) {
				c.Status.ReservedFor = append(c.Status.ReservedFor, consumer)
			}
			wasAllocated := ca.Result != nil
			updated, err := claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
			if err != nil {
				return err
			}
			if wasAllocated {
				done = updated
			}
			return nil
		})
		if done != nil {
			allocated = append(allocated, done)
		}
		if err != nil {
			return allocated, fmt.Errorf("reserving ResourceClaim %s: %w", ca.Claim, err)
		}
	}
	return allocated, nil
}

// releaseClaims takes back the allocations reserveClaims wrote for a pod whose binding then
// failed, so that the pod may be placed elsewhere: the pod leaves reservedFor and, when nobody
// else is there, the allocation goes. Best effort: kube-controller-manager does the same once the
// pod is deleted.
func (b *Binder) releaseClaims(ctx context.Context, r *Request, allocated []*resourceapi.ResourceClaim) {
	claims := b.client.ResourceV1().ResourceClaims(r.Pod.Namespace)
	for _, c := range allocated {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := claims.Get(ctx, c.Name, metav1.GetOptions{})
			if err != nil || cur.UID != c.UID {
				return err
			}
			cur.Status.ReservedFor = slices.DeleteFunc(cur.Status.ReservedFor, func(x resourceapi.ResourceClaimConsumerReference) bool { return x.UID == r.UID })
			if len(cur.Status.ReservedFor) == 0 {
				cur.Status.Allocation = nil
			}
			_, err = claims.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			b.opts.Log.V(1).Info("ResourceClaim not released after a failed binding", "claim", c.Namespace+"/"+c.Name, "err", err.Error())
		}
	}
}
