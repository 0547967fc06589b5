// Package checkpoint is the narrow interface the gpu-agent needs from the CUDA driver's process
// checkpoint API (cuCheckpointProcessLock, Checkpoint, Restore, Unlock and GetState; driver r550
// and later), with which an idle notebook's GPU memory moves to host RAM and back while its
// processes stay alive, blocked at their next CUDA call (docs/idle-lending.md#swap).
//
// Two implementations: Open loads the real libcuda.so.1 with dlopen (cgo, Linux), so fairway
// builds and its tests run where there is no driver, and says ErrNotAvailable there; Mock
// simulates processes holding GPU memory, moving it byte for byte to the host and back, with
// failures injected where the driver can fail.
package checkpoint
