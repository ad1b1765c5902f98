# telesched Makefile. `make help` lists the targets.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

GO      ?= go
BIN     := $(abspath bin)
TOOLS   := hack/tools

# Control-plane binaries, built from the Go module proxy (no downloads of
# prebuilt binaries). They depend on go.mod/go.sum only, so they are rebuilt
# when the pinned versions change and not on every run.
CONTROL_PLANE := $(BIN)/etcd $(BIN)/kube-apiserver
CONTROLLER_GEN := $(BIN)/controller-gen
# node_exporter, built from the Go module proxy, for the agent benchmark.
NODE_EXPORTER_VERSION := v1.12.1
NODE_EXPORTER := $(BIN)/node_exporter

VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/telesched/telesched/internal/version.Version=$(VERSION)

# Product binaries: every directory under cmd/.
COMMANDS := $(notdir $(wildcard cmd/*))

# go-nvml's cgo preamble names NVML functions NVIDIA has deprecated; the
# warnings say nothing about telesched and bury real output.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations

# Integration tests find the control plane here.
export TELESCHED_BIN_DIR := $(BIN)

# Arguments for go test (e.g. make test GOTESTFLAGS='-run CRD -v').
GOTESTFLAGS ?=

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9\/.-]+:.*?##/ { printf "  \033[36m%-16s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: $(CONTROL_PLANE) ## Build every binary (telesched commands and the control plane) into bin/.
	@if [ -n "$(COMMANDS)" ]; then \
		echo "go build $(addprefix ./cmd/,$(COMMANDS)) -> bin/"; \
		$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ $(addprefix ./cmd/,$(COMMANDS)); \
	fi

.PHONY: control-plane
control-plane: $(CONTROL_PLANE) ## Build etcd and kube-apiserver from source into bin/ (first build takes minutes).

$(BIN)/etcd: go.mod go.sum hack/etcd/main.go
	@echo "building bin/etcd from go.etcd.io/etcd/server/v3 (first build takes a minute)"
	$(GO) build -o $@ ./hack/etcd

$(BIN)/kube-apiserver: go.mod go.sum
	@echo "building bin/kube-apiserver from k8s.io/kubernetes (first build takes several minutes)"
	$(GO) build -o $@ k8s.io/kubernetes/cmd/kube-apiserver

$(NODE_EXPORTER):
	@echo "building bin/node_exporter $(NODE_EXPORTER_VERSION) from the Go module proxy"
	GOBIN=$(BIN) $(GO) install github.com/prometheus/node_exporter@$(NODE_EXPORTER_VERSION)

$(CONTROLLER_GEN): $(TOOLS)/go.mod $(TOOLS)/go.sum
	$(GO) build -C $(TOOLS) -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD YAML into deploy/crds/.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=deploy/crds

##@ Verify

.PHONY: verify
verify: verify-fmt verify-vet verify-generated verify-mod ## Run every check: gofmt, go vet, generated files, go.mod tidiness.

.PHONY: verify-fmt
verify-fmt: ## Fail if any Go file is not gofmt-formatted.
	@out=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

.PHONY: verify-vet
verify-vet: ## Run go vet.
	$(GO) vet ./...

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail if generated code or CRD YAML is stale.
	hack/verify-generated.sh

.PHONY: verify-mod
verify-mod: ## Fail if go.mod/go.sum (root or tools) are not tidy.
	$(GO) mod tidy -diff
	cd $(TOOLS) && $(GO) mod tidy -diff

##@ Test

.PHONY: test
test: build ## Run unit and integration tests (integration tests start a real etcd + kube-apiserver and run bin/telesched-scheduler).
	$(GO) test -count=1 $(GOTESTFLAGS) ./...

.PHONY: test-unit
test-unit: ## Run unit tests only (no control plane).
	$(GO) test -short $(GOTESTFLAGS) ./...

##@ Bench

.PHONY: bench
bench: bench-go bench-agent bench-scheduler ## Run every benchmark.

.PHONY: bench-go
bench-go: ## Run Go benchmarks with memory statistics.
	$(GO) test -run '^$$' -bench . -benchmem ./...

.PHONY: bench-agent
bench-agent: build $(NODE_EXPORTER) ## Agent vs node_exporter: CPU per cycle, RSS, object size, API writes per minute (about 6 minutes).
	$(GO) run ./test/bench/agent -agent $(BIN)/telesched-agent -node-exporter $(NODE_EXPORTER) $(BENCHFLAGS)

.PHONY: bench-scheduler
bench-scheduler: build ## Scheduling throughput, default vs telesched profile, same binary and API server (NODES=1000 PODS=1000 ROUNDS=3).
	$(GO) run ./test/bench/scheduler -scheduler $(BIN)/telesched-scheduler -nodes $(or $(NODES),1000) -pods $(or $(PODS),1000) -rounds $(or $(ROUNDS),3)

##@ Demo

.PHONY: demo
demo: ## Run the embedded sandbox: a local cluster scheduled by telesched.
	@echo "make demo: the sandbox (cmd/telesched-sandbox) is not built yet." >&2
	@exit 1

##@ Clean

.PHONY: clean
clean: ## Remove bin/.
	rm -rf $(BIN)
