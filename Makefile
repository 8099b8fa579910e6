# stallfs: `make demo` and `make test` on a fresh Debian machine, as root.
# Each target installs what it needs (fuse3 via apt-get) the first time.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := /usr/local/go/bin:$(PATH)

GO        ?= go
BIN       := bin/stallfs
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 1s
# Debian packages installed when their command is missing: "command:package".
APT_DEPS  := fusermount3:fuse3

.PHONY: all build test demo bench fmt vet clean deps check-go

all: build

check-go:
	@command -v $(GO) >/dev/null || { echo "make: Go 1.26 is needed (expected at /usr/local/go/bin/go)" >&2; exit 1; }

build: check-go
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/stallfs

# deps installs the Debian packages the tests, demo and benchmarks need;
# apt-get update runs only when something is missing.
deps:
	@missing=""; \
	for d in $(APT_DEPS); do \
	  command -v "$${d%%:*}" >/dev/null || missing="$$missing $${d#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
	@test -c /dev/fuse || { echo "make: /dev/fuse is missing (load the fuse module or run the container with --device /dev/fuse)" >&2; exit 1; }

vet: check-go
	$(GO) vet ./...

fmt: check-go
	gofmt -w $$($(GO) list -f '{{.Dir}}' ./...)

test: check-go deps
	$(GO) vet ./...
	@out="$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:" >&2; echo "$$out" >&2; exit 1; fi
	$(GO) test -race -timeout 20m ./...

demo: build deps
	STALLFS_BIN=$(BIN) scripts/demo.sh

bench: build deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	STALLFS_BIN=$(BIN) scripts/bench-mount.sh

clean:
	rm -rf bin out
