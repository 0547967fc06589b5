package console_test

import (
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/fairway-sched/fairway/console"
	"github.com/fairway-sched/fairway/console/internal/consoletest"
	"github.com/fairway-sched/fairway/console/view"
)

// The render benchmarks serve each page at 1,000 nodes (8,000 GPUs) and 20,000 pods, the
// issue's target being under 50 ms of server time per page. BenchmarkPage measures a request
// on a built model (what every request but the first after a change costs: authenticate,
// scope, cut, render); BenchmarkModel the rebuild after a change, which at most one request
// per MinRebuild (and the live stream) pays. Run with -benchmem for memory; docs/console.md has
// the figures.
const (
	benchNodes = 1000
	benchPods  = 20000
)

func BenchmarkModel(b *testing.B) {
	heap0 := liveHeap()
	s := consoletest.Large(benchNodes, benchPods)
	objects := liveHeap()
	m := view.Build(s)
	model := liveHeap()
	runtime.KeepAlive(m)
	// What stays in memory: the objects (as the cache holds them, managed fields stripped) and
	// one model built from them.
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		before := processCPU()
		_ = view.Build(s)
		cpu += processCPU() - before
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(objects-heap0)/(1<<20), "objects-MiB")
	b.ReportMetric(float64(model-objects)/(1<<20), "model-MiB")
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// processCPU is the CPU the process has spent (user and system, all threads: the garbage
// collector's too). Reported as cpu-ns/op beside wall time, it stays meaningful when other work
// on the machine inflates wall time, as on the shared development machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPage(b *testing.B) {
	snap := consoletest.Large(benchNodes, benchPods)
	restricted := view.Scope{Namespaces: map[string]bool{"team-07": true}, Nodes: true}
	for _, user := range []struct {
		name  string
		scope view.Scope
	}{{"admin", view.Everything()}, {"restricted", restricted}} {
		s := newServer(b, console.Options{Store: &staticStore{snap: snap}, Scoper: scoper{user.scope}})
		// Build the model once, as the first request after a change does.
		if w := get(b, s, "/"); w.Code != http.StatusOK {
			b.Fatalf("GET /: %d", w.Code)
		}
		for _, p := range []string{"/", "/queues", "/queues/team-07", "/workloads", "/workloads?q=team-07", "/nodes", "/why?q=team-07/wf-28"} {
			b.Run(user.name+p, func(b *testing.B) {
				b.ReportAllocs()
				var size int
				var cpu time.Duration
				for b.Loop() {
					before := processCPU()
					w := get(b, s, p)
					cpu += processCPU() - before
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s: %d", p, w.Code)
					}
					size = w.Body.Len()
				}
				b.ReportMetric(float64(size)/1024, "KiB/page")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
