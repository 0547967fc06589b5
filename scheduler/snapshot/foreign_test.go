package snapshot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
)

func TestForeignPending(t *testing.T) {
	s := New()
	k := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "plain", Name: name} }
	s.UpsertForeignPending(k("a"), "default-scheduler", 1)
	s.UpsertForeignPending(k("b"), "default-scheduler", 2)
	s.UpsertForeignPending(k("c"), "volcano", 8)
	s.UpsertForeignPending(k("d"), "default-scheduler", 0) // asks for no GPU
	s.UpsertForeignPending(k("a"), "default-scheduler", 1) // the same again
	want := []ForeignPending{{Scheduler: "default-scheduler", Pods: 2, GPUs: 3}, {Scheduler: "volcano", Pods: 1, GPUs: 8}}
	if diff := cmp.Diff(want, s.ForeignPending()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	s.DeleteForeignPending(k("c"))
	s.DeleteForeignPending(k("b"))
	s.DeleteForeignPending(k("nope"))
	want = []ForeignPending{{Scheduler: "default-scheduler", Pods: 1, GPUs: 1}}
	if diff := cmp.Diff(want, s.ForeignPending()); diff != "" {
		t.Errorf("after deletions (-want +got):\n%s", diff)
	}
}
