// Package e2enodes is the real-node tier of fairway's end-to-end tests (build tag e2enodes,
// `make e2e-nodes`): the local control plane of test/cluster with real kubelets and containerd
// in Docker containers (test/nodes). Each test says what the kwok tier (test/e2e) could not
// show; everything that only needs the API stays there, where it is fast.
//
// It needs a Docker engine and the images of `make images`; without them the tests fail (they
// never skip).
package e2enodes
