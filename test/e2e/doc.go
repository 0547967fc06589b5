// Package e2e holds fairway's end-to-end tests. They run against a real local control plane
// (package test/cluster) built from Go modules by `make tools`, and only with the e2e build tag:
//
//	make e2e
//	go test -tags e2e -v ./test/e2e/...
//
// Component logs of a failed test are kept in test/e2e/_artifacts/<test name>/.
package e2e
