# task-operator. `make help` lists the targets.
SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

CONTROLLER_TOOLS_VERSION ?= v0.23.0
LOCALBIN := $(CURDIR)/bin

# The release version: the image tag, and the tag of the runner image the
# manager defaults to (internal/version). Override to cut a release.
VERSION ?= $(shell sed -n 's/^const Release = "\(.*\)"/\1/p' internal/version/version.go)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -s -w -X github.com/taskops/task-operator/internal/version.Version=$(VERSION)
CONTROLLER_GEN := $(LOCALBIN)/controller-gen-$(CONTROLLER_TOOLS_VERSION)
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(LOCALBIN)/staticcheck-$(STATICCHECK_VERSION)

# What controller-gen writes: the CRD, the manager's RBAC role and deepcopy.
CRD_DIR  := config/crd/bases
RBAC_DIR := config/rbac
GEN_CRD   = crd output:crd:artifacts:config=$(1)
GEN_RBAC  = rbac:roleName=task-operator-manager output:rbac:artifacts:config=$(1)

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests from the Go markers, and the chart's templates made from them.
	$(CONTROLLER_GEN) $(call GEN_CRD,$(CRD_DIR)) $(call GEN_RBAC,$(RBAC_DIR)) paths="./..."
	go run ./hack/release chart

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: docs
docs: ## Write the reference pages generated from the code (docs/reference/, the chart's README) and kubectl task's output files (internal/cli/testdata/golden/); `go test` fails when one is stale.
	UPDATE_DOCS=1 go test -count=1 -run 'Reference|TheChartREADMEIsItsValues' ./cmd/manager/ ./internal/metrics/ ./api/v1alpha1/ ./test/chart/
	UPDATE_DOCS=1 KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test -count=1 -run 'TestOutputGolden' ./internal/cli/

.PHONY: verify
verify: verify-generated verify-yaml ## Fail when generated files are stale or a YAML file repeats a key.

.PHONY: verify-yaml
verify-yaml: ## Fail when a tracked YAML file repeats a key in one mapping (Helm would silently keep the last).
	go run ./hack/yamlcheck $$(git ls-files '*.yaml' '*.yml')

.PHONY: verify-generated
verify-generated: $(CONTROLLER_GEN) ## Fail when committed generated files are stale.
	CONTROLLER_GEN=$(CONTROLLER_GEN) hack/verify-generated.sh

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet and check formatting.
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	go vet ./...
	go vet -tags e2e ./test/e2e/
	go vet -tags reliability ./test/reliability/
	go vet -tags kueue ./test/kueue/
	go vet -tags multikueue ./test/multikueue/

.PHONY: lint
lint: $(STATICCHECK) ## Run staticcheck (staticcheck.conf) over every package and build tag; it must be clean.
	$(STATICCHECK) ./...
	$(STATICCHECK) -tags e2e ./test/e2e/
	$(STATICCHECK) -tags reliability ./test/reliability/
	$(STATICCHECK) -tags kueue ./test/kueue/
	$(STATICCHECK) -tags multikueue ./test/multikueue/

$(STATICCHECK):
	@mkdir -p $(LOCALBIN)/.sc
	GOBIN=$(LOCALBIN)/.sc go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(LOCALBIN)/.sc/staticcheck $@ && rmdir $(LOCALBIN)/.sc

.PHONY: envtest-assets
envtest-assets: ## Build (or reuse) etcd and kube-apiserver for the integration tests.
	@hack/k8s-binaries.sh etcd kube-apiserver >/dev/null

.PHONY: node-deps
node-deps: ## Install the Debian packages of the local cluster's real node when missing; fails, saying why, when it cannot.
	@hack/real-node-deps.sh

# demo, run and test-e2e install the real node's packages first. Off CI a
# machine that cannot have them still gets a local cluster, on a kwok node
# (simulated pods), and says so; on CI (CI=true) that is a failure: a green
# CI run must mean that real containers ran.
define node-deps-or-fallback
	@if ! hack/real-node-deps.sh; then \
	  if [ "$${CI:-}" = true ]; then echo "node-deps: CI=true and the real node's packages cannot be installed: failing (a green CI must mean real containers ran)" >&2; exit 1; fi; \
	  echo "node-deps: WARNING: no real node on this machine; the local cluster will use a kwok node (simulated pods), and the end-to-end tests whose pods must run are SKIPPED" >&2; \
	fi
endef

# suite-then-down PREFIX,NAME,COMMAND runs a suite that starts a local
# cluster (in $(PREFIX)_CLUSTER_DIR, else tmp/NAME-cluster). The suite
# brings its cluster down itself, also on Ctrl-C; when it fails in a way
# that skips its own teardown (a `go test -timeout` panic, a crash), this
# brings it down, so no process of the local cluster outlives a failed
# run. PREFIX_KEEP_CLUSTER=1 keeps it for a post-mortem.
define suite-then-down
	@set +e; $(3); rc=$$?; \
	if [ $$rc -ne 0 ] && [ "$${$(1)_KEEP_CLUSTER:-}" != 1 ]; then \
	  hack/local-cluster.sh down --dir "$${$(1)_CLUSTER_DIR:-tmp/$(2)-cluster}" || true; \
	fi; exit $$rc
endef

.PHONY: test
test: test-integration check-prometheus test-e2e ## Run all tests: unit, integration (envtest), the shipped alert rules and dashboard, and end to end on a real node (builds the control plane on first use).

.PHONY: check-prometheus
check-prometheus: ## Validate config/prometheus (rules as promtool does; every query names an exported metric).
	@mkdir -p tmp
	go run ./hack/metricnames > tmp/metric-names.txt
	cd hack/promcheck && METRIC_NAMES=$(CURDIR)/tmp/metric-names.txt go test ./... -count=1

.PHONY: test-integration
test-integration: vet lint verify ## Unit and integration tests against a real kube-apiserver + etcd (the quick loop), and the reconciler's once without its speed shortcuts.
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test ./... -count=1
	$(MAKE) --no-print-directory test-no-fast-path

.PHONY: test-no-fast-path
test-no-fast-path: ## Both controllers' envtest suites and the reconcile fuzz seeds with every speed shortcut off (--fast-path=false): a failure here is a correctness bug.
	TASK_OPERATOR_FAST_PATH=false KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test ./internal/reconciler/ ./internal/taskqueue/ ./test/fuzz/ -count=1

COMPAT_VERSIONS ?= $(notdir $(wildcard hack/k8s-compat/v*))

.PHONY: test-compat
test-compat: ## The envtest suites (Task controller both ways, queue controller, manifests) against the older Kubernetes minors in hack/k8s-compat/ (not in `make test`; run before a release).
	@set -e; for v in $(COMPAT_VERSIONS); do \
	  assets=$$(hack/k8s-compat.sh $$v); \
	  echo "test-compat: Kubernetes $$v"; \
	  KUBEBUILDER_ASSETS=$$assets go test -count=1 ./internal/reconciler/ ./internal/taskqueue/ ./test/manifests/; \
	  TASK_OPERATOR_FAST_PATH=false KUBEBUILDER_ASSETS=$$assets go test -count=1 ./internal/reconciler/ ./internal/taskqueue/; \
	done

STRESS_N ?= 10
STRESS_HOGS ?= 2

.PHONY: test-stress
test-stress: ## The envtest suites STRESS_N times (default 10) with STRESS_HOGS busy loops (default 2), then once with -race; reports each failure by test name (not in `make test`).
	STRESS_N=$(STRESS_N) STRESS_HOGS=$(STRESS_HOGS) hack/stress.sh

.PHONY: build
build: ## Build the manager, the task runner and the kubectl plugin into bin/.
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/manager ./cmd/manager
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/task-runner ./cmd/task-runner
	CGO_ENABLED=0 go build -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/kubectl-task ./cmd/kubectl-task

FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## Fuzz Task admission and the reconciler against envtest, FUZZTIME per target (the first run builds instrumented dependencies).
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test ./test/fuzz/ -run '^$$' -fuzz '^FuzzTaskAdmission$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 20x
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test ./test/fuzz/ -run '^$$' -fuzz '^FuzzReconcile$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 20x

.PHONY: test-reliability
test-reliability: ## Reliability and security scenarios on a local control plane. Durations of every target: docs/development.md.
	$(call suite-then-down,RELIABILITY,reliability,go test -tags reliability ./test/reliability/ -count=1 -timeout 60m -v)

.PHONY: test-kueue
test-kueue: ## Tasks queued by a real Kueue (v0.17.0, built from the Go module proxy on first use) on a local cluster with a kwok node.
	$(call suite-then-down,KUEUE,kueue,go test -tags kueue ./test/kueue/ -count=1 -timeout 20m -v)

.PHONY: test-multikueue
test-multikueue: node-deps ## Tasks dispatched by Kueue's MultiKueue from a manager control plane to two worker control planes (kwok nodes, a real node on the manager and worker-1, a Kueue in each).
	@set +e; go test -tags multikueue ./test/multikueue/ -count=1 -timeout 30m -v; rc=$$?; \
	if [ $$rc -ne 0 ] && [ "$${MULTIKUEUE_KEEP_CLUSTER:-}" != 1 ]; then \
	  for d in "" -worker-1 -worker-2; do hack/local-cluster.sh down --dir "$${MULTIKUEUE_CLUSTER_DIR:-tmp/multikueue-cluster}$$d" || true; done; \
	fi; exit $$rc

.PHONY: test-reliability-fast
test-reliability-fast: ## The fast subset of the reliability scenarios (CI runs it).
	$(call suite-then-down,RELIABILITY,reliability,RELIABILITY_FAST=1 go test -tags reliability ./test/reliability/ -count=1 -timeout 20m -v)

BENCH_N ?= 1000
BENCH_ARGS ?=

.PHONY: bench
bench: ## Benchmarks on a local control plane, with ratios to baselines measured in the same run (BENCH_N=100: the quick variant CI runs; BENCH_ARGS= adds flags).
	go run ./test/bench -n $(BENCH_N) -profile $(BENCH_ARGS)

.PHONY: bench-rules
bench-rules: ## What the Task CRD's validation rules cost the API server per Task create and status write, against the same CRD without them (test/rulecost; about 3 min).
	KUBEBUILDER_ASSETS=$$(hack/k8s-binaries.sh etcd kube-apiserver) go test ./test/rulecost -run '^$$' -bench . -benchtime 1x -count=1

SCALE_N ?= 10000

.PHONY: bench-scale
bench-scale: ## The scale scenario: 10,000 Tasks through one operator, a restart over 20,000, a queue with 10,000 waiting (not in CI; SCALE_N= to change).
	go run ./test/bench -n $(SCALE_N) -scenarios scale -repeat 1 -profile -work-dir tmp/bench-scale $(BENCH_ARGS)

##@ Running

# The project's own kubectl, the same version as the cluster it builds.
KUBECTL ?= $(shell hack/k8s-binaries.sh kubectl)/kubectl

.PHONY: install
install: ## Install the CRD into the cluster of the current kubeconfig.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: run
run: image ## Run the operator against the current kubeconfig's cluster, or a local one it starts (ARGS= adds manager flags).
	$(node-deps-or-fallback)
	hack/run.sh $(ARGS)

.PHONY: demo
demo: image ## Show the operator end to end on a throwaway local cluster with a real node.
	$(node-deps-or-fallback)
	hack/demo.sh

.PHONY: test-e2e
test-e2e: image ## End-to-end tests on a local cluster with a real node (tmp/e2e-cluster): the operator as a process and deployed from config/default.
	$(node-deps-or-fallback)
	$(call suite-then-down,E2E,e2e,E2E_IMAGE_ARCHIVE=$(IMAGE_ARCHIVE) go test -tags e2e ./test/e2e/ -count=1 -timeout 30m -v)

##@ Deployment

# The image `image`/`docker-build` build and `deploy` runs: pinned, never :latest.
IMG ?= ghcr.io/taskops/task-operator:$(VERSION)
# `make image` writes the release image here, as an OCI image archive.
IMAGE_ARCHIVE := $(LOCALBIN)/image/task-operator.tar
CONTAINER_TOOL ?= docker
# kustomize, only for `edit set image` (the same version kubectl embeds).
KUSTOMIZE_VERSION ?= v5.8.1
KUSTOMIZE := $(LOCALBIN)/kustomize-$(KUSTOMIZE_VERSION)
# How long deleting the Tasks (their finalizers need the running operator) may take.
DELETE_TIMEOUT ?= 5m
DEPLOY_DIR := tmp/deploy

# Deletes every Task and waits for its finalizer: run while the operator still
# runs, before removing it or the CRD (skipped when the CRD is not installed).
define delete-tasks
	if $(KUBECTL) get crd tasks.batch.taskops.io >/dev/null 2>&1; then \
	  $(KUBECTL) delete tasks.batch.taskops.io --all --all-namespaces --wait --timeout=$(DELETE_TIMEOUT); \
	fi
endef

.PHONY: image
image: ## Build the release image without a container engine: bin/image/task-operator.tar (OCI archive, reproducible).
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/linux/manager ./cmd/manager
	CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "$(LDFLAGS)" -o $(LOCALBIN)/linux/task-runner ./cmd/task-runner
	go run ./hack/image operator -manager $(LOCALBIN)/linux/manager -runner $(LOCALBIN)/linux/task-runner \
	  -version $(VERSION) -revision "$(REVISION)" -out $(IMAGE_ARCHIVE)

DIST ?= dist
RELEASE_PLATFORMS := linux_amd64 linux_arm64
PLUGIN_PLATFORMS := linux_amd64 linux_arm64 darwin_amd64 darwin_arm64

.PHONY: release
release: ## Write the release into dist/: install.yaml, crds.yaml, the multi-platform image archive, plugin archives, krew manifest, SBOMs, checksums (docs/releasing.md).
	rm -rf $(DIST) && mkdir -p $(DIST)/bin
	for p in $(RELEASE_PLATFORMS); do \
	  for b in manager task-runner; do \
	    CGO_ENABLED=0 GOOS=$${p%_*} GOARCH=$${p#*_} go build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/bin/$$p/$$b ./cmd/$$b; \
	  done; \
	done
	for p in $(PLUGIN_PLATFORMS); do \
	  CGO_ENABLED=0 GOOS=$${p%_*} GOARCH=$${p#*_} go build -trimpath -ldflags "$(LDFLAGS)" -o $(DIST)/bin/kubectl-task_$$p/kubectl-task ./cmd/kubectl-task; \
	done
	go run ./hack/image operator -arch amd64,arm64 -bin-dir $(DIST)/bin -version $(VERSION) -revision "$(REVISION)" -out $(DIST)/task-operator-image.tar >/dev/null
	go run ./hack/release -version $(VERSION) -date "$$(git log -1 --format=%cI 2>/dev/null)" -bin-dir $(DIST)/bin -out $(DIST)
	cat $(DIST)/checksums.txt

.PHONY: release-reproducible
release-reproducible: ## Build the release twice, the second time with an empty build cache, and fail unless every artifact is the same bytes.
	$(MAKE) release DIST=$(DIST)
	mkdir -p $(LOCALBIN) && cp $(DIST)/checksums.txt $(LOCALBIN)/release-checksums-1.txt
	GOCACHE=$$(mktemp -d) $(MAKE) release DIST=$(DIST)
	diff $(LOCALBIN)/release-checksums-1.txt $(DIST)/checksums.txt && echo "release: two builds, the same bytes"

.PHONY: image-push
image-push: ## Push bin/image/task-operator.tar to IMG (credentials from ~/.docker/config.json).
	@test -f $(IMAGE_ARCHIVE) || { echo "no $(IMAGE_ARCHIVE): run make image first"; exit 1; }
	go run ./hack/image push -archive $(IMAGE_ARCHIVE) -image $(IMG)

.PHONY: docker-build
docker-build: ## Build the image IMG with a container engine (Dockerfile; the same contents as `make image`).
	$(CONTAINER_TOOL) build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the image IMG.
	$(CONTAINER_TOOL) push $(IMG)

.PHONY: uninstall
uninstall: ## Delete all Tasks (the operator must still run), then the CRD.
	$(delete-tasks)
	$(KUBECTL) delete --ignore-not-found --wait -k config/crd

.PHONY: deploy
deploy: $(KUSTOMIZE) ## Deploy the operator (CRD, RBAC, namespace, manager) running image IMG.
	rm -rf $(DEPLOY_DIR) && mkdir -p $(DEPLOY_DIR)
	cd $(DEPLOY_DIR) && $(KUSTOMIZE) create --resources ../../config/default && \
	  $(KUSTOMIZE) edit set image ghcr.io/taskops/task-operator=$(IMG)
	$(KUSTOMIZE) build $(DEPLOY_DIR) | $(KUBECTL) apply --server-side -f -

.PHONY: undeploy
undeploy: ## Delete all Tasks (while the operator still runs), then everything deploy created.
	$(delete-tasks)
	$(KUBECTL) delete --ignore-not-found --wait -k config/default

$(KUSTOMIZE):
	@mkdir -p $(LOCALBIN)/.kz
	GOBIN=$(LOCALBIN)/.kz go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION)
	mv $(LOCALBIN)/.kz/kustomize $@ && rmdir $(LOCALBIN)/.kz

$(CONTROLLER_GEN):
	@mkdir -p $(LOCALBIN)/.cg
	GOBIN=$(LOCALBIN)/.cg go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_TOOLS_VERSION)
	mv $(LOCALBIN)/.cg/controller-gen $@ && rmdir $(LOCALBIN)/.cg

.PHONY: clean
clean: ## Remove built binaries (keeps the cached Kubernetes binaries in bin/k8s).
	rm -rf $(LOCALBIN)/manager $(LOCALBIN)/task-runner $(LOCALBIN)/kubectl-task $(LOCALBIN)/linux $(LOCALBIN)/image $(LOCALBIN)/images
