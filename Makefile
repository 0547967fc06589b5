# fairway: the two commands a newcomer needs are `make demo` and `make test`.
# Everything else is here for developers and CI; `make help` lists it.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(CURDIR)
BIN  := $(ROOT)/bin
GO   ?= go
export PATH := $(BIN):$(PATH)
# Tests, benchmarks and the demo find the control-plane binaries here, and e2e tests run the
# fairway binary `make build` made instead of building their own.
export FAIRWAY_BIN := $(BIN)
export FAIRWAY_BINARY := $(BIN)/fairway
# go-nvml's cgo preamble uses deprecated NVML declarations; keep cold builds readable.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

GOTEST_FLAGS ?= -count=1
E2E_TIMEOUT  ?= 40m
# `go test` runs a few vet checks before each package's tests; `make test` has run all of vet's
# analyzers (golangci-lint's govet, e2e files included) in verify already, so unit and e2e runs
# turn that off (UNIT_VET= keeps it).
UNIT_VET ?= -vet=off
# Top-level e2e tests run this many at a time, each on a cluster of its own: most of a test is
# waiting for controllers, so on 2 cores 3 at a time took about half as long as one by one, and
# 4 took 410 s where 3 took 497 (a third of the 2 cores was still idle at 3). Since then the
# suite has grown to 115 tests and runs beside the unit tests: at 4, CI's API servers took up to
# 36 s to start and two tests ran out of their waits (stop 44), so 3 again, trading about a fifth
# more wall time for headroom.
E2E_PARALLEL ?= 3

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z0-9_-]+:.*##/ {printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Build

.PHONY: tools
tools: ## Build the local control plane and dev tools into bin/ (skipped when up to date).
	hack/build-tools.sh

.PHONY: tools-sync
tools-sync: ## After changing a go.mod (fairway's or a tool's): put every module back on one build list, so cold builds compile each package once (hack/tools/tools.work).
	hack/tools-sync.sh

# VERSION is what `fairway version` prints: stamped by `make build` and `make image`.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)

.PHONY: build
build: ## Build fairway's binaries into bin/ (fairway, and kubectl-fairway for `kubectl fairway`).
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN)/ ./cmd/...
	ln -sf fairway $(BIN)/kubectl-fairway

IMAGE ?= ghcr.io/fairway-sched/fairway:dev

SHIM_CFLAGS ?= -O2 -Wall -Wextra -shared -fPIC -fvisibility=hidden

.PHONY: shim
shim: ## Build libfairway-share.so, the library a GPU share's container loads (gpu-agent/shim), into bin/ with gcc alone.
	mkdir -p $(BIN)
	gcc $(SHIM_CFLAGS) -o $(BIN)/libfairway-share.so gpu-agent/shim/lib/share.c -ldl -lpthread

.PHONY: image
image: ## Build the container image (needs a Docker engine; not used by tests or the demo).
	docker build --build-arg VERSION=$(VERSION) -t $(IMAGE) .

.PHONY: images
images: ## Build the real-node tier's images and the fairway image with Docker from Debian's packages (no registry; needs root, debootstrap, gcc). See docs/real-nodes.md.
	hack/build-tools.sh kubelet containerd containerd-shim-runc-v2 ctr
	hack/images/build.sh

.PHONY: generate
generate: ## Regenerate deepcopy code and CRD manifests from api/.
	hack/build-tools.sh controller-gen
	$(BIN)/controller-gen object paths=./api/... crd:crdVersions=v1 output:crd:artifacts:config=charts/fairway/crds
	$(GO) run ./dashboards/cmd/generate -out dashboards/json -out charts/fairway/dashboards

##@ Check

.PHONY: verify
verify: ## gofmt, generated files up to date, lint (go vet's analyzers included), no binary or >1 MB file tracked.
	hack/verify.sh

.PHONY: unit
unit: ## Unit tests and engine scenarios (no cluster).
	$(GO) test $(GOTEST_FLAGS) $(UNIT_VET) ./...

.PHONY: test-liveness
test-liveness: ## The guarantee liveness property on 20,000 random clusters (make unit runs 500).
	$(GO) test -run '^TestGuaranteeLiveness$$' -count=1 -timeout 60m ./scheduler/engine/ -liveness.seeds=20000

.PHONY: e2e e2e-run
e2e: tools build ## End-to-end tests on a local cluster built from Go modules.
	@$(MAKE) --no-print-directory e2e-run
# e2e-run is the suite alone, for `make test`, which has built the tools and fairway already.
e2e-run:
	$(GO) test $(GOTEST_FLAGS) $(UNIT_VET) -tags e2e -timeout $(E2E_TIMEOUT) -parallel $(E2E_PARALLEL) -v ./test/e2e/... 2>&1 | hack/test-summary.sh

.PHONY: e2e-nodes
e2e-nodes: tools build ## The real-node tier: kubelets and containerd in Docker containers (needs Docker and `make images`; not part of `make test`).
	@hack/images/check.sh
	$(GO) test $(GOTEST_FLAGS) -tags e2enodes -timeout $(E2E_TIMEOUT) -v ./test/nodes/... ./test/e2enodes/... 2>&1 | hack/test-summary.sh

.PHONY: chart-test
chart-test: ## helm lint and helm template of charts/fairway (defaults, every option, bad values) through the pinned helm.
	hack/build-tools.sh helm
	$(GO) test $(GOTEST_FLAGS) ./test/chart/

.PHONY: dashboards-check
dashboards-check: tools build ## Every dashboard query on a real Prometheus scraping a local cluster; fails on a query that returns nothing.
	$(GO) test $(GOTEST_FLAGS) -tags e2e -timeout 15m -run '^TestDashboards$$' -v ./test/e2e/ 2>&1 | hack/test-summary.sh

.PHONY: test
# The unit tests run beside the e2e suite: the suite mostly waits on its clusters' controllers (a
# third of 2 cores idle while it ran alone), the unit tests mostly compile. Each one's output
# comes whole when it ends (--output-sync).
test: verify chart-test tools build ## Everything CI runs.
	@$(MAKE) --no-print-directory -j2 --output-sync=target unit e2e-run

##@ Run

# DEMO_PACE is how long each act's outcome stays on screen (a Go duration; the demo's default
# is 20s); DEMO_STEP=1 waits for Enter before each act instead. Both only for `make demo`.
DEMO_PACE ?=
DEMO_STEP ?=

.PHONY: demo
demo: ## Build what is missing, start a local cluster (4 fake nodes x 8 H100), install fairway from its chart and play the product story (DEMO_PACE=40s, DEMO_STEP=1). Ctrl-C stops it.
	@echo "demo: 1/3 building the local cluster's tools into bin/ (skipped when up to date; 15-20 min the first time)"
	@$(MAKE) --no-print-directory tools
	@echo "demo: 2/3 building fairway"
	@$(MAKE) --no-print-directory build
	@echo "demo: 3/3 starting the demo"
	$(GO) run ./test/demo $(if $(DEMO_PACE),-pace $(DEMO_PACE)) $(if $(DEMO_STEP),-step)

.PHONY: demo-check
demo-check: tools build ## Play the demo's story without a terminal; exit 0 only when every act's outcome was observed, then as a newcomer's `make demo | less`.
	$(GO) run ./test/demo -check
	$(GO) test -tags e2e $(GOTEST_FLAGS) -run '^TestDemoPiped$$' ./test/e2e

##@ Measure

BENCH_NODES ?= 500
BENCH_PODS  ?= 5000
BENCH_QPS   ?= 100
BENCH_BURST ?= 200
BENCH_RUNS  ?= 3
# BENCH_E2E_ARGS: more flags of test/bench/e2e, e.g. "-schedulers fairway,noop -profile /tmp/prof
# -baseline /tmp/fairway-main" (a fairway built elsewhere, run in the same rotation).
BENCH_E2E_ARGS ?=
BENCH_SIM_SEEDS ?= 42-51

.PHONY: bench-e2e bench-e2e-gang
bench-e2e: tools build ## Pods/s creation to bound on kwok nodes: fairway, kube-scheduler and a no-op binder (the ceiling), same API server and client QPS/burst (docs/performance.md).
	$(GO) run ./test/bench/e2e -nodes $(BENCH_NODES) -pods $(BENCH_PODS) -qps $(BENCH_QPS) -burst $(BENCH_BURST) -runs $(BENCH_RUNS) $(BENCH_E2E_ARGS)
bench-e2e-gang: tools build ## The same burst in gangs of 8, fairway only.
	$(GO) run ./test/bench/e2e -nodes $(BENCH_NODES) -pods $(BENCH_PODS) -qps $(BENCH_QPS) -burst $(BENCH_BURST) -runs $(BENCH_RUNS) -gang 8 $(BENCH_E2E_ARGS)

# bench-scale: KAI-Scheduler's public scale suite on kwok nodes (test/scale); BENCH_SCALE_NODES
# scales it down for a quick run, BENCH_SCALE_RUNS > 1 prints medians.
BENCH_SCALE_NODES ?= 500
BENCH_SCALE_RUNS  ?= 1

.PHONY: bench-scale
bench-scale: tools build ## KAI-Scheduler's scale suite on fairway: fill, reclaim, impossible gang, topology; each outcome checked, each figure beside KAI's (docs/performance.md). BENCH_SCALE_NODES=50 for a quick run.
	$(GO) run ./test/bench/scale -nodes $(BENCH_SCALE_NODES) -runs $(BENCH_SCALE_RUNS)

.PHONY: bench-webhook
bench-webhook: tools ## Webhook admission latency at 500 pods/s over TLS on loopback (10,000-pod burst).
	$(GO) run ./test/bench/webhook

.PHONY: gpu-check
gpu-check: ## Build the real-GPU check into _output/gpu-check (run test/gpu/run.sh on a GPU machine).
	test/gpu/build.sh

.PHONY: bench
bench: ## Engine and runtime-cycle benchmarks, KAI-shaped clusters included, outcomes checked every iteration, plus the API readers (admission seal, GPU request) (5 runs, benchstat-friendly; docs/performance.md).
	$(GO) test -run '^$$' -bench . -benchmem -count 5 ./scheduler/... ./api/...

.PHONY: bench-sim
bench-sim: ## openb replays (13 traces x 10 seeds, the FGD paper's protocol) vs the paper's FGD and BestFit; fails if fairway misses the bar.
	$(GO) run ./cmd/fairway sim openb --data scheduler/sim/testdata/openb --seeds $(BENCH_SIM_SEEDS)

.PHONY: bench-sim-time
bench-sim-time: ## The openb trace in time with real durations, two queues with quotas: fairway vs the first-fit baseline (summary; CSV and plots in _output/sim-openb-time).
	$(GO) run ./cmd/fairway sim run --config scheduler/sim/testdata/openb-time/fairway.yaml \
		--compare scheduler/sim/testdata/openb-time/firstfit.yaml --out _output/sim-openb-time
