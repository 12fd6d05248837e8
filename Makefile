# Phalanx — gang, topology-aware and workload-aware-preemption scheduling for Kubernetes.
SHELL := /usr/bin/env bash
GO ?= go
BIN := bin
# Packages whose tests link no API server: the fast loop, run with -race.
UNIT_PKGS = $(shell $(GO) list ./... | grep -v -e /test/integration -e /pkg/generated -e /pkg/sandbox -e /cmd/)
INTEGRATION_TIMEOUT ?= 25m

.PHONY: all build generate verify lint test test-unit test-integration run clean tools

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

tools:
	hack/build-tools.sh

generate:
	hack/update-codegen.sh

verify:
	hack/verify-codegen.sh
	$(GO) mod tidy -diff

lint: tools
	@out=$$(gofmt -l apis cmd config manifests pkg test); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...

test-unit:
	$(GO) test -race -count=1 $(UNIT_PKGS)

test-integration:
	$(GO) test -count=1 -timeout $(INTEGRATION_TIMEOUT) ./test/integration/...

test: test-unit test-integration

# The local sandbox: a control plane, 32 simulated GPU nodes in 2 zones × 4
# racks, and the Phalanx scheduler, all in one process.
run:
	$(GO) build -o $(BIN)/phalanx-sim ./cmd/phalanx-sim
	$(BIN)/phalanx-sim up

clean:
	rm -rf $(BIN) .phalanx
