package fakegpu

import (
	"crypto/sha256"
	"fmt"
)

// DeviceUUID is the UUID of GPU index on fake node nodeName: stable across restarts and
// distinct per node, so the scheduler and the PodResources stand-in can predict it.
func DeviceUUID(nodeName string, index int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("fairway-fake-gpu/%s/%d", nodeName, index)))
	b := sum[:16]
	b[6] = (b[6] & 0x0f) | 0x50 // version 5 (name-based)
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	return fmt.Sprintf("GPU-%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
