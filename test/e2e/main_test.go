//go:build e2e

package e2e

import (
	"os"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain gives controller-runtime's global logger (envtest and controller-runtime's clients
// log through it) one sink for the whole run. The tests run in parallel (`make e2e`'s
// -parallel): a test's own testr logger set there would be called after that test ended, which
// the testing package turns into a panic.
//
// Every top-level test calls t.Parallel but two: TestIdleLending and TestGPUAgentsAreCheap bound
// latencies and start-up times, so they run first, alone on the machine.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(m.Run())
}
