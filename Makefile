# Phalanx — gang, topology-aware and workload-aware-preemption scheduling for Kubernetes.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
# Packages whose tests link no API server: the fast loop, run with -race.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/integration -e /pkg/generated -e /tools/sandbox -e '/tools/bench$$' -e /cmd/)
# Generous: on a fresh 2-core machine the suite takes about 20 minutes, but
# a shared, loaded one can take twice that.
INTEGRATION_TIMEOUT ?= 60m
# Every fuzz target, as package:Target (go test -fuzz takes one target per
# package and run). `make fuzz` fails when a Fuzz function in apis, cmd or
# pkg is missing here, so a new target cannot be forgotten.
FUZZ_TARGETS = \
	./pkg/groups:FuzzAttach \
	./pkg/groups:FuzzGroupTree \
	./pkg/placement:FuzzPlanGroup \
	./pkg/placement:FuzzFindVictims
FUZZTIME ?= 10s

.PHONY: all build generate verify lint test test-unit fuzz test-integration testreport test-times-reset integration-times soak run clean tools image image-check docker-image scheduler-plugins upstream-perf

all: build

build:
	$(GO) build -ldflags "-X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)" -o $(BIN)/ ./cmd/... ./tools/cmd/...

tools:
	hack/build-tools.sh

# scheduler-plugins' own scheduler (Coscheduling) and PodGroup controller,
# sigs.k8s.io/scheduler-plugins v0.34.7 on Kubernetes v1.34 libraries, from
# their own module (hack/scheduler-plugins/go.mod): the baseline of the
# bench's scheduler-plugins arm. `phalanx-sim bench` builds and caches them
# itself when not given these (--scheduler-plugins-scheduler,
# --scheduler-plugins-controller).
scheduler-plugins:
	cd hack/scheduler-plugins && $(GO) build -o ../../$(BIN)/scheduler-plugins-scheduler ./scheduler
	cd hack/scheduler-plugins && $(GO) build -o ../../$(BIN)/scheduler-plugins-controller ./controller

generate:
	hack/update-codegen.sh

verify:
	hack/verify-codegen.sh
	$(GO) mod tidy -diff

lint: tools
	@out=$$(gofmt -l apis cmd config hack manifests pkg test tools); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck $$($(GO) list ./... | grep -v /pkg/generated/)

# Every go test run of `make test` goes through hack/testreport: one line
# per package, a failing test's whole output, and its durations recorded in
# TEST_TIMES so that `make test` ends with the slowest tests of all of them.
TEST_TIMES ?= .phalanx/test-times.tsv
TESTREPORT = $(BIN)/testreport -record $(TEST_TIMES) -slowest 0

testreport:
	@mkdir -p $(dir $(TEST_TIMES))
	$(GO) build -o $(BIN)/testreport ./hack/testreport

test-unit: testreport
	set -o pipefail; $(GO) test -race -count=1 -json $(UNIT_PKGS) 2>&1 | $(TESTREPORT)

# tools/bench's own tests link the API server (through tools/sandbox), so they
# run here rather than in test-unit.
# The integration tests run in INTEGRATION_SHARDS processes at once
# (hack/shardtest: they share process-wide state, so not with t.Parallel),
# dealt longest first by the durations in INTEGRATION_TIMES; refresh that
# file from a full run with `make integration-times`.
INTEGRATION_SHARDS ?= 4
INTEGRATION_TIMES ?= hack/integration-times.tsv
INTEGRATION_PKG = github.com/phalanx-sched/phalanx/test/integration

test-integration: testreport
	$(GO) build -o $(BIN)/shardtest ./hack/shardtest
	$(GO) test -c -o $(BIN)/integration.test ./test/integration
	@# Warms the build cache for the Kueue tests, which build phalanx-kueue:
	@# built cold inside a shard (about 4 CPU-minutes) it would compete with
	@# the other shards' timing-sensitive tests.
	$(GO) build -o /dev/null ./tools/cmd/phalanx-kueue
	set -o pipefail; ( $(BIN)/shardtest -binary $(abspath $(BIN))/integration.test -dir test/integration \
	    -package $(INTEGRATION_PKG) -shards $(INTEGRATION_SHARDS) -times $(INTEGRATION_TIMES) -timeout $(INTEGRATION_TIMEOUT) && \
	  $(GO) test -count=1 -json ./tools/bench/ ) 2>&1 | $(TESTREPORT)

integration-times:
	grep -P '^$(INTEGRATION_PKG)\t' $(TEST_TIMES) | cut -f1-3 | sort > $(INTEGRATION_TIMES)

# Each fuzz target for FUZZTIME past its seed corpus (testdata/fuzz/<Target>
# beside it; test-unit runs the corpus too). A failing input is written
# there: commit it as a regression entry with the fix.
fuzz:
	@found=$$(grep -rEo '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' apis cmd pkg | \
	    sed -E 's#^(.*)/[^/]+:func (Fuzz[A-Za-z0-9_]+)$$#./\1:\2#' | sort); \
	  listed=$$(printf '%s\n' $(FUZZ_TARGETS) | sort); \
	  if [ "$$found" != "$$listed" ]; then \
	    echo "FUZZ_TARGETS in the Makefile does not list exactly these fuzz targets:"; echo "$$found"; exit 1; fi
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "== $${t#*:} in $${t%%:*} for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) "$${t%%:*}"; \
	done

test-times-reset:
	@rm -f $(TEST_TIMES)

test: test-times-reset test-unit fuzz test-integration
	@$(BIN)/testreport -summarize $(TEST_TIMES)

# The randomized invariant runner with SOAK_SEEDS seeds (default 1,000;
# make test runs the 20 fixed seeds and the regression seeds) and its
# faults on (refused binds, victims that ignore SIGTERM), SOAK_PARALLEL
# at a time on one control plane; SOAK_FIRST fixes the first seed (default
# time-based). A failing seed is printed with its replay command: commit it
# to randomRegressionSeeds in test/integration/random_test.go with the fix.
# Then kubectl phalanx fit against the scheduler's real outcome over
# FIT_CASES cases (make test runs 20).
SOAK_SEEDS ?= 1000
SOAK_PARALLEL ?= 4
SOAK_FIRST ?=
FIT_CASES ?= 250
soak:
	set -o pipefail; PHALANX_RANDOM_FAULTS=1 PHALANX_RANDOM_SEEDS=$(SOAK_SEEDS) PHALANX_RANDOM_PARALLEL=$(SOAK_PARALLEL) PHALANX_RANDOM_FIRST=$(SOAK_FIRST) \
	  $(GO) test -count=1 -timeout 180m -parallel $(SOAK_PARALLEL) -run TestRandomizedInvariants -v ./test/integration/ | \
	  grep -E '^\s*(--- FAIL|PASS|FAIL|ok)|VIOLATION|seeds run'
	set -o pipefail; PHALANX_FIT_CASES=$(FIT_CASES) $(GO) test -count=1 -timeout 120m -run TestFitAgreesWithScheduler -v ./test/integration/ | \
	  grep -E '^\s*(--- FAIL|PASS|FAIL|ok)|fit agreement|seed [0-9]+:'

# Upstream kube-scheduler's own scheduler_perf workloads
# (podgroup/{gangscheduling,basicscheduling,tas}, workload_preemption and
# dra with its subdirectories), read from the k8s.io/kubernetes module at
# run time and replayed under Phalanx and under upstream's kube-scheduler
# v1.37.2 on the same objects, with upstream's metrics side by side. The
# default is upstream's performance set (500 to 5,000 nodes; hours on 2
# cores); PERF_WORKLOADS narrows it by name, e.g.
# PERF_WORKLOADS=3000Pods,Preemption, and PERF_CONFIGS by directory, e.g.
# PERF_CONFIGS=dra,dra/partitionabledevices. make test runs the
# integration-sized ones (TestUpstreamSchedulerPerfWorkloads, and two of
# the dra ones in TestUpstreamSchedulerPerfDRAWorkloads).
PERF_LABELS ?= performance
PERF_WORKLOADS ?=
# The sandbox's API server reports the Kubernetes version it is built from
# (a build without this says v0.0.0-master, which Helm's kubeVersion check
# and Kueue refuse).
KUBE_VERSION ?= $(shell $(GO) list -m -f '{{.Version}}' k8s.io/kubernetes)
SIM_LDFLAGS = -X k8s.io/component-base/version.gitVersion=$(KUBE_VERSION)

PERF_CONFIGS ?=
PERF_ARMS ?= phalanx-proc,upstream
PERF_JSON ?= .phalanx/upstream-perf.json
upstream-perf:
	$(GO) build -ldflags "$(SIM_LDFLAGS)" -o $(BIN)/phalanx-sim ./tools/cmd/phalanx-sim
	@mkdir -p $(dir $(PERF_JSON))
	$(BIN)/phalanx-sim upstream-perf --labels '$(PERF_LABELS)' --workloads '$(PERF_WORKLOADS)' $(if $(PERF_CONFIGS),--configs '$(PERF_CONFIGS)') --arms $(PERF_ARMS) --json $(PERF_JSON)

# The demo: every built-in scenario (bin/phalanx-sim run --list) on an
# in-process sandbox, with PASS/FAIL per expectation and an HTML
# report; then the local sandbox to play with: a control plane, 32 simulated
# GPU nodes in 2 zones × 4 racks, and the Phalanx scheduler, in one process.
run:
	$(GO) build -ldflags "$(SIM_LDFLAGS)" -o $(BIN)/phalanx-sim ./tools/cmd/phalanx-sim
	$(GO) build -o $(BIN)/phalanx-kueue ./tools/cmd/phalanx-kueue
	$(GO) build -o $(BIN)/kubectl-phalanx ./cmd/kubectl-phalanx
	$(BIN)/phalanx-sim run --report .phalanx/report.html all
	@echo "The report, a picture of the cluster after every step: .phalanx/report.html"
	@echo
	$(BIN)/phalanx-sim up

# The container image with both binaries, built without docker or a base
# image (hack/ociimage): FROM scratch, static binaries, user 65532, no
# shell. Writes the OCI layout $(BIN)/image/oci and the tarball
# $(BIN)/image/phalanx.tar (docker load, crane push, skopeo copy). The
# same commit gives the same digest: the binaries are built with -trimpath
# and every timestamp is the commit's time (SOURCE_DATE_EPOCH).
# image-check also unpacks it and runs both binaries from the layer.
# docker-image builds the same binaries with the same flags through the
# Dockerfile, for those who have docker and the golang and distroless
# base images.
IMAGE ?= phalanx:dev
GOARCH_IMAGE ?= $(shell $(GO) env GOARCH)
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
VERSION_PKG = github.com/phalanx-sched/phalanx/pkg/version
LDFLAGS = -s -w -X $(VERSION_PKG).Version=$(VERSION) -X $(VERSION_PKG).Commit=$(COMMIT)

image:
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_IMAGE) $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/image/ ./cmd/phalanx-scheduler ./cmd/phalanx-controller
	$(GO) run ./hack/ociimage -arch $(GOARCH_IMAGE) -tag $(IMAGE) -version $(VERSION) -revision $(COMMIT) -created $(SOURCE_DATE_EPOCH) \
	  -file $(BIN)/image/phalanx-scheduler=/usr/local/bin/phalanx-scheduler \
	  -file $(BIN)/image/phalanx-controller=/usr/local/bin/phalanx-controller \
	  -entrypoint /usr/local/bin/phalanx-scheduler \
	  -layout $(BIN)/image/oci -tarball $(BIN)/image/phalanx.tar

image-check: image
	PHALANX_IMAGE=$(abspath $(BIN))/image/oci PHALANX_IMAGE_VERSION=$(VERSION) PHALANX_IMAGE_REVISION=$(COMMIT) \
	  $(GO) test -count=1 -run 'TestMadeImage' -v ./hack/ociimage

docker-image:
	docker build --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) .

clean:
	rm -rf $(BIN) .phalanx
