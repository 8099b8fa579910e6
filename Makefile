# stallfs: `make demo` and `make test` on a fresh Debian machine, as root.
# Each target installs what it needs (apt-get, go install, npm ci) the first time.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
export PATH := /usr/local/go/bin:$(PATH)

GO        ?= go
BIN       := bin/stallfs
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -X main.version=$(VERSION)
BENCHTIME ?= 1s
FUZZTIME  ?= 30s
# Debian packages installed when their command is missing: "command:package".
# fuse3 for every mount, curl and jq for the scripts that read a mount's
# control socket or metrics; Node.js and npm only for the tests (Azurite).
APT_DEPS      := fusermount3:fuse3 curl:curl jq:jq
APT_TEST_DEPS := node:nodejs npm:npm g++:g++

# Test servers, at the versions the test helpers pin: versitygw (S3) is built
# into .cache/bin, Azurite is installed from testdata/azurite's lockfile.
VERSITYGW_VERSION := $(shell sed -n 's/^const Version = "\(v[0-9.]*\)"/\1/p' backend/s3/s3test/s3test.go)
VERSITYGW         := .cache/bin/versitygw
AZURITE_DIR       := testdata/azurite
AZURITE_VERSION   := $(shell sed -n 's/.*"azurite": "\([0-9.]*\)".*/\1/p' $(AZURITE_DIR)/package.json)

.PHONY: all build test demo bench bench-cache bench-prefetch bench-s3 bench-azure bench-peers bench-e2e bench-scale bench-list validate-simulate soak fuzz fmt vet clean deps test-deps torch-deps check-go test-servers azurite

all: build

check-go:
	@command -v $(GO) >/dev/null || { echo "make: Go 1.26 is needed (expected at /usr/local/go/bin/go)" >&2; exit 1; }

build: check-go
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/stallfs

# apt_install installs the packages of the "command:package" list $(1) whose
# command is missing; apt-get update runs only when something is missing.
define apt_install
	@missing=""; \
	for d in $(1); do \
	  command -v "$${d%%:*}" >/dev/null || missing="$$missing $${d#*:}"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi
endef

# deps installs what mounting needs (demo, bench, tests).
deps:
	$(call apt_install,$(APT_DEPS))
	@test -c /dev/fuse || { echo "make: /dev/fuse is missing (load the fuse module or run the container with --device /dev/fuse)" >&2; exit 1; }

# test-deps adds what only the tests need.
test-deps: deps torch-deps
	$(call apt_install,$(APT_TEST_DEPS))

# torch-deps installs Debian's PyTorch and torchvision for /usr/bin/python3
# (the order tests and scripts/train_loader.py).
torch-deps:
	@/usr/bin/python3 -c 'import torch, torchvision' 2>/dev/null || { \
	  echo "installing: python3-torch python3-torchvision"; \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-torch python3-torchvision; }

# test-servers prepares the S3 and Azure emulators so that the tests do not
# build or install them under their own timeouts.
test-servers: $(VERSITYGW) azurite

$(VERSITYGW): | check-go
	@test -n "$(VERSITYGW_VERSION)" || { echo "make: no versitygw version in backend/s3/s3test/s3test.go" >&2; exit 1; }
	GOBIN=$(CURDIR)/.cache/bin $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

azurite: test-deps
	@if ! grep -qs '"version": "$(AZURITE_VERSION)"' $(AZURITE_DIR)/node_modules/azurite/package.json; then \
	  echo "npm ci --prefix $(AZURITE_DIR)"; \
	  npm ci --no-audit --no-fund --prefix $(AZURITE_DIR); \
	fi

vet: check-go
	$(GO) vet ./...

fmt: check-go
	gofmt -w $$($(GO) list -f '{{.Dir}}' ./...)

test: check-go test-deps test-servers
	$(GO) vet ./...
	@out="$$(gofmt -l $$($(GO) list -f '{{.Dir}}' ./...))"; \
	if [ -n "$$out" ]; then echo "gofmt needed on:" >&2; echo "$$out" >&2; exit 1; fi
	$(GO) test -race -timeout 20m ./...

demo: build deps
	STALLFS_BIN=$(BIN) scripts/demo.sh

bench: build deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./...
	STALLFS_BIN=$(BIN) scripts/bench-mount.sh

# The MinIO cache against the page cache under per-epoch random order
# (root: cgroups, drop_caches); figures go to docs/benchmarks.md.
bench-cache: build deps
	STALLFS_BIN=$(BIN) scripts/bench-cache.sh

# Epoch-order prefetch: fetch stall per epoch with and without, a PyTorch
# DataLoader over a throttled mount; figures go to docs/benchmarks.md.
bench-prefetch: build deps torch-deps
	STALLFS_BIN=$(BIN) scripts/bench-prefetch.sh

# The object-store epoch benchmarks against the test servers (and rclone,
# which the scripts install); figures go to docs/s3.md and docs/azure.md.
bench-s3: build deps $(VERSITYGW)
	STALLFS_BIN=$(BIN) scripts/bench-s3.sh

bench-azure: build deps azurite
	STALLFS_BIN=$(BIN) scripts/bench-azure.sh

# The peer group's partitioned cache: 1, 2 and 3 mounts on 127.0.0.1,
# each caching D/3; figures go to docs/benchmarks.md.
bench-peers: build deps
	STALLFS_BIN=$(BIN) scripts/bench-peers.sh

# The DS-Analyzer measurement with a real PyTorch loader (issue 9): the
# page cache in a memory cgroup, rclone --vfs-cache-mode full, stallfs with
# and without prefetch, same budget f x D; CSV, table and PNGs to docs/e2e/.
bench-e2e: build deps torch-deps $(VERSITYGW)
	$(call apt_install,rclone:rclone)
	@/usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { \
	  echo "installing: python3-matplotlib"; \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-matplotlib; }
	STALLFS_BIN=$(BIN) scripts/bench-e2e.sh

# ImageNet-scale metadata (issue 10): 1,281,167 files generated once under
# out/scale, cold mount, find through the mount, remount from the persisted
# tree, RSS; figures go to docs/scale.md.
bench-scale: build deps
	STALLFS_BIN=$(BIN) scripts/bench-scale.sh

# Listing 200,000 objects in ImageNet layout on the S3 server and Azurite:
# stallfs's flat and parallel walks against rclone lsf -R
# (docs/scale-listing.md); BENCH_LIST_RTT=20ms adds a pass through a proxy
# with that delay per request.
bench-list: build deps $(VERSITYGW) azurite
	$(call apt_install,rclone:rclone)
	STALLFS_BIN=$(BIN) scripts/bench-list.sh

# `stallfs simulate` against real mounts: one mount and 2-3 peers over a
# throttled local source (docs/simulate.md).
validate-simulate: build deps
	STALLFS_BIN=$(BIN) scripts/validate-simulate.sh

# 64 verified readers plus prefetch for SOAK_MINUTES (default 10); fails
# when RSS, goroutines or open fds grow (docs/reliability.md). Not in test.
soak: build deps
	STALLFS_BIN=$(BIN) scripts/soak.sh

# Every fuzz target (func FuzzXxx in a _test.go file) for FUZZTIME each, one
# after the other; `make test` runs only their seed corpora. A crasher is
# written to the package's testdata/fuzz/ and fails the target.
fuzz: check-go
	@for f in $$(grep -rl --include='*_test.go' --exclude-dir=node_modules --exclude-dir=.cache --exclude-dir=.git '^func Fuzz' . | sort); do \
	  for t in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
	    echo "== $$(dirname $$f) $$t ($(FUZZTIME))"; \
	    $(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) "$$(dirname $$f)" || exit 1; \
	  done; \
	done

clean:
	rm -rf bin out
