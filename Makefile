# The one entry point: every target installs what it needs through the Go
# module proxy and Debian packages; nothing has to be set up by hand.
GO       ?= go
PKGS     := ./...
FUZZTIME ?= 60s
BIN      := bin

.PHONY: run venuesim run-binance-sim build test race unit bench fuzz lint tidy-check check clean

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

## tidy-check: go.mod and go.sum are exactly what the code needs
tidy-check:
	$(GO) mod tidy -diff

check: lint tidy-check test

clean:
	rm -rf $(BIN)
