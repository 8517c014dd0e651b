# The one entry point: every target installs what it needs through the Go
# module proxy and Debian packages; nothing has to be set up by hand.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 60s
BIN      := bin

# The optional test files (chaos, soak, browser) are only added by their tags, never
# swapped for others, so vetting and linting with every tag covers every file once.
ALLTAGS  := chaos,soak,browser
# Redocly CLI lints docs/openapi.yaml and docs/openapi-ops.yaml; npm installs the pinned
# version once into a cache.
REDOCLY_VERSION := 2.11.1
REDOCLY_DIR     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/marketfeed/redocly-$(REDOCLY_VERSION)
REDOCLY         := $(REDOCLY_DIR)/node_modules/.bin/redocly
# openapi-typescript and TypeScript check the documents as a typed TypeScript consumer sees
# them; npm installs both, pinned, once into a cache the same way.
OPENAPI_TS_VERSION := 7.13.0
TYPESCRIPT_VERSION := 5.9.3
OPENAPI_TS_DIR     := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/marketfeed/openapi-ts-$(OPENAPI_TS_VERSION)-typescript-$(TYPESCRIPT_VERSION)
OPENAPI_TS         := $(OPENAPI_TS_DIR)/node_modules/.bin/openapi-typescript
TSC                := $(OPENAPI_TS_DIR)/node_modules/.bin/tsc
TS_CLIENT          := docs/clients/ts
# promtool checks and unit-tests the rules in deploy/prometheus and parses the dashboard's
# expressions. It comes from Debian's prometheus package, pinned to one release: the package is
# downloaded and unpacked into a cache, never installed, so no Prometheus server is set up or
# started. A Debian revision of the same release (a security fix) is taken when the pinned one
# is no longer served; another release is refused.
PROMETHEUS_DEB     := 2.42.0+ds-5+deb12u1
PROMETHEUS_RELEASE := $(firstword $(subst +, ,$(PROMETHEUS_DEB)))
PROMTOOL_DIR       := $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/marketfeed/prometheus-$(PROMETHEUS_RELEASE)
PROMTOOL           := $(PROMTOOL_DIR)/usr/bin/promtool
RULES              := $(wildcard deploy/prometheus/*.rules.yml)

.PHONY: sweep recovery ingest ingest-ab cluster cluster-bench run venuesim build build-static test race unit quick bench fuzz loadtest test-cdn chaos soak abuse lint fmt-check vet staticcheck openapi-lint openapi-ts pages-docs pages-docs-check test-browser rules tidy-check check clean

# need_tests fails unless every |-separated alternative of the -run pattern $(2) names a test
# in package $(1) (built with the flags $(3)): a renamed test must not turn a target into one
# that passes by running nothing.
define need_tests
	@set -e; list="$$($(GO) test $(3) -list . $(1))"; \
	for p in $$(printf '%s' '$(2)' | tr '|' ' '); do \
	  printf '%s\n' "$$list" | grep -Eq "^($$p)" || { echo "$(1): no test matches $$p"; exit 1; }; \
	done
endef

## run: serve the API on the embedded simulated venue (http://127.0.0.1:8080/api/public/pairs)
# Built, then run, rather than go run: go run exits 1 when Ctrl-C stopped the
# program cleanly, which make reports as an error, and a go build records the
# commit the version names.
run:
	$(GO) build -o $(BIN)/ ./cmd/marketfeed
	exec $(BIN)/marketfeed $(ARGS)

## cluster: a NATS server (JetStream in memory), venuesim, three marketfeed members and nginx as a
## round-robin balancer in front, all on loopback; prints where to look (installs nginx when missing)
cluster:
	$(GO) build -o $(BIN)/ ./cmd/marketfeed ./cmd/venuesim github.com/nats-io/nats-server/v2
	BIN=$(BIN) scripts/cluster.sh

## cluster-bench: three members behind nginx round robin on one NATS server, against venuesim with
## Binance's weights and 446 pairs: an aggregator every 10 s and a hot client through a steady
## minute, a leader killed, NATS killed for 40 s, and clients at 1.5 and twice the rate limit; prints
## answers, book age, replication lag, venue weight, rate-limit overshoot, CPU and RSS per member
## (about 20 minutes; EXTRA=20 for a short run)
cluster-bench:
	$(GO) build -o $(BIN)/ ./cmd/marketfeed ./cmd/venuesim ./cmd/clusterbench github.com/nats-io/nats-server/v2
	BIN=$(BIN) EXTRA=$(or $(EXTRA),400) scripts/clusterbench.sh

## venuesim: serve the simulated venue over a Binance-compatible REST API on 127.0.0.1:8500
venuesim:
	$(GO) run ./cmd/venuesim $(ARGS)

## build: every command (marketfeed, venuesim and the benchmarks' clients) into bin/
build:
	$(GO) build -o $(BIN)/ ./cmd/...

## test: the lint and go.mod checks, the rules' checks and unit tests, then every test once
## without and once with the race detector (allocation tests need the first, data races the
## second), then the pages in a browser. lint has vetted the code in full, so go test skips its
## own partial vet. The tests get promtool, to parse the dashboard's expressions and check every
## mode's /metrics, through PROMTOOL.
test: lint tidy-check rules unit race test-browser

unit: $(PROMTOOL)
	PROMTOOL=$(PROMTOOL) $(GO) test -count=1 -vet=off $(PKGS)

## quick: every test in -short mode, a first try (about 2 minutes): it leaves out the tests that
## build and run the real binaries, start nginx, run venue or stream chaos or send a million
## requests, and needs nothing but Go and the module proxy
quick:
	$(GO) test -short -count=1 $(PKGS)

race: $(PROMTOOL)
	PROMTOOL=$(PROMTOOL) $(GO) test -race -count=1 -shuffle=on -vet=off $(PKGS)

## rules: promtool checks the alert and recording rules in deploy/prometheus, runs their unit
## tests (deploy/prometheus/tests) and checks the example configuration that loads them
## (downloads the pinned promtool when missing)
rules: $(PROMTOOL)
	$(PROMTOOL) check rules $(RULES)
	$(PROMTOOL) test rules deploy/prometheus/tests/*.yml
	$(PROMTOOL) check config deploy/prometheus/prometheus.yml

## bench: Go benchmarks, ns/op and allocations per route
bench:
	$(GO) test -run='^$$' -bench=. -benchmem $(PKGS)

## loadtest: marketfeed against nginx (static file, from memory) and a plain Go server, one core
## each (about 9 minutes; installs wrk and nginx when missing); prints the table of targets and
## writes docs/benchmarks.svg. LOADTEST_ARGS passes flags, e.g. LOADTEST_ARGS="-rounds 1 -duration 1s".
loadtest:
	$(GO) build -o $(BIN)/loadbench ./cmd/loadbench
	$(BIN)/loadbench $(LOADTEST_ARGS)

## test-cdn: the end-to-end test with nginx as a caching proxy in front (part of make test too)
test-cdn:
	$(call need_tests,./cmd/marketfeed,TestCDNInFront)
	$(GO) test -count=1 -run TestCDNInFront -v ./cmd/marketfeed

## test-browser: the live market page and the API references in headless Chromium, driven by
## chromedp against the built binary on the simulator and venuesim (about 70 s, one minute of it
## the page left open; installs Debian's chromium when missing; part of make test)
BROWSER_RUN := ^TestBrowser
test-browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  sudo=""; if [ "$$(id -u)" -ne 0 ]; then sudo="sudo"; fi; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium; }
	$(call need_tests,./apptest,$(BROWSER_RUN),-tags browser)
	$(GO) test -tags browser -run '$(BROWSER_RUN)' -count=1 -v ./apptest

## build-static: a static, stripped binary with its version, as docs/deploy.md ships it
build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$$(git describe --tags --always --dirty 2>/dev/null || echo dev)" -o $(BIN)/ ./cmd/marketfeed

## sweep: every pair's book and trades read once a minute, as an aggregator does, beside a hot
## client, against venuesim with Binance's 2,400 weight a minute (400 and 800 extra markets, 3
## minutes each, streams on and off); prints 200 share, book age, trade lag, REST weight, CPU and
## RSS against their targets. SWEEP_ARGS passes flags, e.g. SWEEP_ARGS="-extra 20 -duration 30s".
sweep:
	$(GO) run ./cmd/sweepbench $(SWEEP_ARGS)

## recovery: 446 pairs on venuesim with Binance's weights, an aggregator reading every book and
## trades every 10 s, through what goes wrong: the cold start and a 10 s outage of the stream
## endpoint, each against the venue's bound (the earliest its sliding minute, at marketfeed's
## budget, allows every book's snapshot at the sync depth and the bulk reads) and its least weight;
## a planned rotation of every connection, one line's connections cut, every connection cut, the
## venue closing every connection at 20 s of age, a sequence gap in 10 books; books served in
## every phase judged against the venue's true book; CPU and RSS. About 15 minutes.
## RECOVERY_ARGS passes more flags, e.g. RECOVERY_ARGS="-marketfeed-args '-venue-budget 0.75'".
recovery:
	$(GO) run ./cmd/sweepbench -recovery -extra 400 -outage 10s $(RECOVERY_ARGS)

## ingest: what keeping every book and trade list current costs with no client: venuesim with 846
## and then 446 pairs, every stream fed, one line and then two, a minute each once the books are
## stream-fed; prints CPU share, CPU per depth event (all in), heap allocations per event and RSS
## against their targets. Twice: on venuesim's default diffs (about 14 levels a side, a few hundred
## levels deep), then on diffs shaped as the venue's recorded ones (-depth-window 50: about 4 levels
## a side, a few dozen deep). venuesim grants 24,000 weight a minute so that the books sync in a
## minute: the start is not what is measured. About 16 minutes. INGEST_ARGS passes more flags.
ingest:
	$(GO) run ./cmd/sweepbench -ingest -extra 800,400 -weight-limit 24000 $(INGEST_ARGS)
	$(GO) run ./cmd/sweepbench -ingest -extra 800,400 -weight-limit 24000 -depth-window 50 $(INGEST_ARGS)

## ingest-ab: what a change does to the ingest's CPU: OLD=rev's and NEW=rev's (HEAD) marketfeed
## alternated on one venuesim of 846 pairs, ROUNDS (3) rounds of a minute each once every book is
## stream-fed; prints CPU share, CPU per depth event and RSS per run. About 15 minutes.
ingest-ab:
	scripts/ingest-ab.sh

## chaos: every venue fault against venuesim under traffic (about 5 minutes); prints the figures
CHAOS_RUN := ^TestChaosFull$$
chaos:
	$(call need_tests,./cmd/marketfeed,$(CHAOS_RUN),-tags chaos)
	$(GO) test -tags chaos -run '$(CHAOS_RUN)' -count=1 -v -timeout 30m ./cmd/marketfeed

## soak: the real binaries under mixed traffic while the venue flaps, SOAKTIME long; prints memory/goroutine/fd drift
SOAKTIME ?= 10m
SOAK_RUN := ^TestSoak$$
soak:
	$(call need_tests,./apptest,$(SOAK_RUN),-tags soak)
	$(GO) test -tags soak -run '$(SOAK_RUN)' -count=1 -v -timeout 60m ./apptest -soak.duration=$(SOAKTIME)

## abuse: malformed requests, slow connections, the connection cap, a million client addresses; prints the figures
ABUSE_SERVER := TestTenThousandMalformed|TestBareLineFeed|TestTwoThousandSlow|TestConnection|TestMillionClient|TestSpoofed
ABUSE_MAIN   := TestClientAddressOverTheWire
abuse:
	$(call need_tests,./server,$(ABUSE_SERVER))
	$(call need_tests,./cmd/marketfeed,$(ABUSE_MAIN))
	$(GO) test -count=1 -v -run '$(ABUSE_SERVER)' ./server
	$(GO) test -count=1 -v -run '$(ABUSE_MAIN)' ./cmd/marketfeed

## fuzz: every fuzz target for FUZZTIME each (default 60s)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for target in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

## lint: formatting, go vet, staticcheck and the OpenAPI documents (Redocly, the
## TypeScript types generated from them, and the references built from them), each once
lint: fmt-check vet staticcheck openapi-lint openapi-ts pages-docs-check

## fmt-check: every Go file is as gofmt writes it
fmt-check:
	@out="$$($$($(GO) env GOROOT)/bin/gofmt -l .)"; \
	test -z "$$out" || { echo "gofmt needed (run gofmt -w):"; echo "$$out"; exit 1; }

vet:
	$(GO) vet -tags $(ALLTAGS) $(PKGS)

## staticcheck: the version pinned as a tool in go.mod
staticcheck:
	$(GO) tool staticcheck -tags $(ALLTAGS) $(PKGS)

## openapi-lint: docs/openapi.yaml and docs/openapi-ops.yaml under Redocly's recommended
## rules (installs Node.js and the pinned Redocly CLI when missing)
openapi-lint: $(REDOCLY)
	$(REDOCLY) lint --format=stylish docs/openapi.yaml docs/openapi-ops.yaml

## openapi-ts: openapi-typescript turns both documents into TypeScript types next to
## docs/clients/ts/consumer.ts, a typed consumer of the API, and tsc --strict compiles it
## (installs Node.js and the pinned openapi-typescript and TypeScript when missing)
openapi-ts: $(OPENAPI_TS)
	$(OPENAPI_TS) --array-length -o $(TS_CLIENT)/openapi.d.ts docs/openapi.yaml
	$(OPENAPI_TS) --array-length -o $(TS_CLIENT)/openapi-ops.d.ts docs/openapi-ops.yaml
	$(TSC) --strict -p $(TS_CLIENT)

## pages-docs: the API reference (/docs) and the operator reference (/docs/ops) the binary
## embeds, built into server/pages/site by the pinned Redocly CLI from docs/openapi.yaml and
## docs/openapi-ops.yaml, with the Redoc bundle they load; run it after changing either document
## (installs Node.js and the pinned Redocly CLI when missing)
pages-docs: $(REDOCLY)
	scripts/pages-docs.sh $(REDOCLY_DIR) server/pages/site

## pages-docs-check: the committed references are what pages-docs builds from the documents now
PAGES_DOCS := docs/api.html docs/ops.html assets/redoc.standalone.js
pages-docs-check: $(REDOCLY)
	@set -e; dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	scripts/pages-docs.sh $(REDOCLY_DIR) "$$dir"; \
	for f in $(PAGES_DOCS); do \
	  cmp -s "$$dir/$$f" "server/pages/site/$$f" || { echo "server/pages/site/$$f is not what the documents build: run make pages-docs"; exit 1; }; \
	done

# npm_install installs the packages $(2) into the cache directory $(1), and Node.js first
# when npm is missing.
define npm_install
	@command -v npm >/dev/null 2>&1 || { \
	  sudo=""; if [ "$$(id -u)" -ne 0 ]; then sudo="sudo"; fi; \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update && \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nodejs npm; }
	npm install --prefix $(1) --no-audit --no-fund --loglevel=error $(2)
endef

$(REDOCLY):
	$(call npm_install,$(REDOCLY_DIR),@redocly/cli@$(REDOCLY_VERSION))

$(OPENAPI_TS):
	$(call npm_install,$(OPENAPI_TS_DIR),openapi-typescript@$(OPENAPI_TS_VERSION) typescript@$(TYPESCRIPT_VERSION))

# apt-get download fetches the package file only; when the pinned version is not in apt's
# lists (a new machine, or lists older than the package), they are read again first.
$(PROMTOOL):
	@set -e; dir=$$(mktemp -d); chmod a+rwx "$$dir"; trap 'rm -rf "$$dir"' EXIT; cd "$$dir"; \
	sudo=""; if [ "$$(id -u)" -ne 0 ]; then sudo="sudo"; fi; \
	apt-get download prometheus=$(PROMETHEUS_DEB) 2>/dev/null || { \
	  $$sudo env DEBIAN_FRONTEND=noninteractive apt-get update; \
	  apt-get download prometheus=$(PROMETHEUS_DEB) || apt-get download prometheus; }; \
	got=$$(dpkg-deb -f prometheus_*.deb Version); \
	case "$$got" in $(PROMETHEUS_RELEASE)+*) ;; \
	  *) echo "Debian serves prometheus $$got, not release $(PROMETHEUS_RELEASE): update PROMETHEUS_DEB"; exit 1;; esac; \
	dpkg-deb -x prometheus_*.deb unpacked; \
	mkdir -p $(PROMTOOL_DIR)/usr/bin; \
	cp unpacked/usr/bin/promtool $(PROMTOOL).tmp && mv $(PROMTOOL).tmp $(PROMTOOL); \
	$(PROMTOOL) --version

## tidy-check: go.mod and go.sum are exactly what the code needs
tidy-check:
	$(GO) mod tidy -diff

## check: the same as test, kept for habit
check: test

clean:
	rm -rf $(BIN)
