# The one entry point: every target installs what it needs through the Go
# module proxy and Debian packages; nothing has to be set up by hand.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 60s
BIN      := bin

.PHONY: run venuesim build build-static test race unit bench fuzz loadtest test-cdn chaos soak abuse lint tidy-check check clean

## run: serve the API on the embedded simulated venue (http://127.0.0.1:8080/api/public/pairs)
run:
	$(GO) run ./cmd/marketfeed $(ARGS)

## venuesim: serve the simulated venue over a Binance-compatible REST API on 127.0.0.1:8500
venuesim:
	$(GO) run ./cmd/venuesim $(ARGS)

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## test: every test, once without and once with the race detector
test: unit race

unit:
	$(GO) vet $(PKGS)
	$(GO) test -count=1 $(PKGS)

race:
	$(GO) test -race -count=1 -shuffle=on $(PKGS)

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
	$(GO) test -count=1 -run TestCDNInFront -v ./cmd/marketfeed

## build-static: a static, stripped binary with its version, as docs/deploy.md ships it
build-static:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$$(git describe --tags --always 2>/dev/null || echo dev)" -o $(BIN)/ ./cmd/marketfeed

## chaos: every venue fault against venuesim under traffic (about 5 minutes); prints the figures
chaos:
	$(GO) test -tags chaos -run '^TestChaosFull$$' -count=1 -v -timeout 30m ./cmd/marketfeed

## soak: the real binaries under mixed traffic while the venue flaps, SOAKTIME long; prints memory/goroutine/fd drift
SOAKTIME ?= 10m
soak:
	$(GO) test -tags soak -run '^TestSoak$$' -count=1 -v -timeout 60m ./cmd/marketfeed -soak.duration=$(SOAKTIME)

## abuse: malformed requests, slow connections, the connection cap, a million client addresses; prints the figures
abuse:
	$(GO) test -count=1 -v -run 'TestTenThousandMalformed|TestBareLineFeed|TestTwoThousandSlow|TestConnection|TestMillionClient|TestSpoofed' ./server
	$(GO) test -count=1 -v -run 'TestClientAddressOverTheWire' ./cmd/marketfeed

## fuzz: every fuzz target for FUZZTIME each (default 60s)
fuzz:
	@set -e; for pkg in $$($(GO) list $(PKGS)); do \
	  for target in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run='^$$' -fuzz="^$$target$$" -fuzztime=$(FUZZTIME) $$pkg; \
	  done; \
	done

lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags chaos,soak ./cmd/marketfeed

## tidy-check: go.mod and go.sum are exactly what the code needs
tidy-check:
	$(GO) mod tidy -diff

check: lint tidy-check test

clean:
	rm -rf $(BIN)
