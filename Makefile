# pvguard — see README.md. `make demo` and `make test` are the two commands a newcomer runs.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/pvguard/pvguard/internal/cli.Version=$(VERSION)
export KUBEBUILDER_ASSETS := $(CURDIR)/bin

.PHONY: all build bin/pvguard bin/pvguard-dev tools control-plane browser bench demo dev test unit e2e race vet fmt fmt-check generate clean

all: build

## build: bin/pvguard, bin/kubectl-pvguard (a symlink to it: on PATH, kubectl runs it as the plugin
## `kubectl pvguard`; the binary tells by the name it is run as) and bin/pvguard-dev, the local
## control plane and demo
build: bin/pvguard bin/pvguard-dev

bin/pvguard:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/pvguard ./cmd/pvguard
	ln -sf pvguard bin/kubectl-pvguard

bin/pvguard-dev:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/pvguard-dev ./cmd/pvguard-dev

## tools: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, csi-provisioner,
## csi-resizer, snapshot-controller, csi-snapshotter and promtool in bin/, built from the Go module
## proxy; each rebuilt only when its pins change, each checked to start
tools:
	hack/build-tools.sh

## control-plane: only etcd and kube-apiserver of `make tools`, all that pvguard-dev starts
control-plane:
	hack/build-tools.sh etcd kube-apiserver

## browser: Debian's chromium, for the dashboard's headless browser test
browser:
	hack/install-chromium.sh

## demo: local control plane + pvguard + the misbinding demo, then exit; builds only what it runs
## (etcd, kube-apiserver and bin/pvguard-dev)
demo: control-plane bin/pvguard-dev
	bin/pvguard-dev --exit-after-demo

## dev: like demo, but keep serving until Ctrl-C
dev: control-plane bin/pvguard-dev
	bin/pvguard-dev

# A package's tests get 30 minutes, not go test's 10: test/e2ecluster runs the real control plane
# and its components through 19 flows, about 10 minutes on two shared cores.
## test: formatting, vet, unit tests and end-to-end tests on a real kube-apiserver
test: tools browser fmt-check vet
	$(GO) test -count=1 -timeout 30m ./...

# CONTROL_PLANE_TESTS start a control plane in packages whose other tests need none: unit skips
# them, e2e runs them. CHAOS_CHECKER_TESTS are test/e2echaos's tests of its invariant checker,
# which need none: unit runs them too.
CONTROL_PLANE_TESTS := ^(TestControlPlane|TestCycleOnRealAPIServer)$$
CHAOS_CHECKER_TESTS := ^(TestChecker.*|TestShortfallFindsTheAugmentingPath|TestMonitor|TestLinkViolations)$$

## unit: the tests that need no control plane (the chart tests run bin/promtool, built if missing)
unit:
	hack/build-tools.sh promtool
	$(GO) test -count=1 -skip '$(CONTROL_PLANE_TESTS)' $$($(GO) list ./... | grep -v /test/e2e)
	$(GO) test -count=1 -run '$(CHAOS_CHECKER_TESTS)' ./test/e2echaos/

## e2e: every end-to-end suite (test/e2e*) and the other tests that start a control plane
e2e: tools browser
	$(GO) test -count=1 -v $$($(GO) list ./test/... | grep /test/e2e)
	$(GO) test -count=1 -v -run '$(CONTROL_PLANE_TESTS)' ./internal/devcluster/ ./test/localstatic/

## race: the unit tests of the packages that run work concurrently (the state's indexes, the binder,
## admission, the audit, explanations, the HTTP layer, certificates, the commands, the manifest and
## policy-test readers), and the binder end-to-end suite, under the race detector
race: tools
	$(GO) test -race -count=1 ./storage/ ./clusterstate/ ./binder/ ./webhook/ ./audit/ ./explain/ ./internal/web/ ./policy/ ./certs/ ./internal/cli/ ./internal/devcli/ ./cmd/pvguard/ ./internal/manifests/ ./internal/policytest/ ./test/e2ebinder/

## bench: the benchmarks behind docs/benchmarks.md's targets at a size that finishes in minutes;
## BENCH_LARGE=1 for the documented sizes (100k-object audit, 1,000-pair binder race, pvguard serve
## against 10k-100k pairs, 10,000 policy test cases). The other tables give their own commands.
bench: tools
	$(GO) test -run '^$$' -bench 'Assign|Audit|AdmissionHandler|AdmissionTLS' -benchmem ./binder/ ./policy/ ./webhook/
	$(GO) test -run '^$$' -bench 'PlanAtScale/volumes=$(if $(BENCH_LARGE),(10|50|100)000,10000)/' -benchtime 3x -benchmem ./binder/
	$(GO) run ./hack/bench/admission $(if $(BENCH_LARGE),,-duration 3s -rounds 3)
	$(GO) run ./hack/bench/audit -sizes $(if $(BENCH_LARGE),10000$(comma)50000$(comma)100000,10000$(comma)50000) $(if $(BENCH_LARGE),,-runs 1)
	$(GO) run ./hack/bench/audit -sizes $(if $(BENCH_LARGE),10000$(comma)100000,10000) -modes offline,load -format json $(if $(BENCH_LARGE),,-runs 1)
	$(GO) run ./hack/bench/audit -sizes $(if $(BENCH_LARGE),100000,10000) -modes offline,load -format json -per-file $(if $(BENCH_LARGE),100000,10000) $(if $(BENCH_LARGE),,-runs 1)
	$(GO) run ./hack/bench/audit -sizes $(if $(BENCH_LARGE),100000,10000) -modes offline,load -format yaml-list -per-file $(if $(BENCH_LARGE),100000,10000) $(if $(BENCH_LARGE),,-runs 1)
	$(GO) test -run '^$$' -bench 'ApplyOverhead|ClusterView' -benchtime 300x -benchmem ./test/e2e/
	$(GO) run ./hack/bench/binder -pairs $(if $(BENCH_LARGE),1000,200) -qps 20:30,200:400,1000:2000
	$(GO) run ./hack/bench/scale -pairs $(if $(BENCH_LARGE),10000$(comma)100000$(comma)300000 -modes off$(comma)shadow$(comma)active -upstream 35s -explainers 8 -explain-warm 30s -explain-retry-after -reviews 1000 -etcd-quota 12884901888,2000)
	$(GO) run ./hack/bench/policytest -cases $(if $(BENCH_LARGE),10000,1000) -objects $(if $(BENCH_LARGE),100000,10000) -runs $(if $(BENCH_LARGE),5,1)

comma := ,

vet:
	$(GO) vet ./...

## generate: the chart's files made from Go (charts.GeneratedFiles): the webhook registrations
## (webhook.Registrations) and the rules' CEL forms; the chart tests fail while one is stale
generate:
	$(GO) run ./hack/generate

fmt:
	gofmt -w $$(git ls-files '*.go')

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

clean:
	rm -f bin/pvguard bin/kubectl-pvguard bin/pvguard-dev
