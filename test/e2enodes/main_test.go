//go:build e2enodes

package e2enodes

import (
	"os"
	"testing"

	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestMain gives controller-runtime's global logger (the clients of test/cluster log through it)
// one sink for the whole run; unset, controller-runtime prints a stack trace on first use.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	os.Exit(m.Run())
}
