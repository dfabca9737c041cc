# companion — see README.md. `make run` starts companion, `make test` runs
# every test; both set up what they need first.

GO        ?= go
VERSION   ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -X main.version=$(VERSION)
DATA_DIR  ?= $(CURDIR)/.data
BIN       := bin/companion
# Extra flags for `make run`'s companion, e.g. ARGS="--listen 127.0.0.1:8080"
# (later flags win, so ARGS can override the ones below).
ARGS      ?=
# `make run RUN_BIN=path` runs a binary built elsewhere (skipping the build)
# and `BOX_IMAGE=image` an image of your own (skipping box-image): the
# process test runs make this way.
RUN_BIN   ?=
BOX_IMAGE ?=
# The guest SDK and packer are a module of their own (so authors outside
# this repository can go get them); ./... does not reach into it.
SDK       := providers/wasm/sdk

.PHONY: all build run test bench lint setup modules box-image clean screenshot dist

all: build

setup:
	@scripts/setup.sh

# First-party Wasm provider modules, built like a third party's and embedded
# in the binary.
modules:
	@scripts/build-modules.sh

# The build goes to $(BIN).new and replaces $(BIN) only when no process is
# running it (a second `make run` must not swap the binary of the first).
build: modules
	@echo "make: building $(BIN) (the first build downloads and compiles dependencies: a few minutes)" >&2
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN).new ./cmd/companion
	@scripts/replace-bin.sh $(BIN).new $(BIN)

# The box image `make run` uses for Docker workspaces: an agent-server
# emulator FROM scratch (no registry is needed; the real agent-server image,
# companion's default, would have to be pulled). It carries no test label.
box-image:
	@echo "make: checking the box image (built on first run: about a minute)" >&2
	@$(GO) run ./e2e/boximage/cmd/box-image > .box-image
	@echo "make: box image $$(cat .box-image)" >&2

# companion's stderr goes straight to the terminal. The recipe's shell
# execs with-keyring (make sends SIGTERM to its child, and dash would die
# without passing it on), and with-keyring passes SIGINT/SIGTERM on to
# companion and ends its keyring session after it: stopping make closes
# WebSocket clients with 1001 and leaves nothing running.
run: setup $(if $(RUN_BIN),,build) $(if $(BOX_IMAGE),,box-image)
	@echo "make: starting companion desktop (data in $(DATA_DIR)); stop it with Ctrl-C" >&2
	@echo "make: open the ready line's page_url in a browser for the web page (it carries the token after #)" >&2
	image=$(or $(BOX_IMAGE),$$(cat .box-image)); \
	exec scripts/with-keyring.sh $(or $(RUN_BIN),$(BIN)) desktop --data-dir $(DATA_DIR) \
		--docker-image "$$image" --docker-scope dev --exit-on-stdin-close=false $(ARGS)

# The export-store tests run a real S3 server (versitygw, built once into
# .cache/bin: a few minutes the first time).
test: modules
	@scripts/setup.sh --test
	@scripts/versitygw.sh >/dev/null
	cd $(SDK) && $(GO) test -count=1 ./...
	scripts/with-keyring.sh --private env COMPANION_REQUIRE_KEYRING=1 COMPANION_REQUIRE_MODULES=1 COMPANION_REQUIRE_STORES=1 \
		$(GO) test -count=1 -timeout 40m ./...

# One JSON line per figure on stdout (with its in-run baseline, goal and
# whether it is met), then a Markdown table of the run on stderr for docs/benchmarks.md.
# About 9 minutes on 2 cores; `go run ./internal/benchrun -only GROUP` runs one group.
bench: setup modules
	@scripts/setup.sh --test # the page benchmark runs headless Chromium
	@scripts/versitygw.sh >/dev/null # the export-store benchmark's S3 server
	scripts/with-keyring.sh --private $(GO) run ./internal/benchrun

# docs/page.png (1280×800) and docs/page-narrow.png (a 390×844 phone), the
# page with a few workspaces in different states, taken by the layout test
# (Docker, an emulated cloud provider, headless Chromium).
screenshot: modules
	@scripts/setup.sh --test
	scripts/with-keyring.sh --private env COMPANION_REQUIRE_KEYRING=1 COMPANION_REQUIRE_MODULES=1 \
		COMPANION_PAGE_SCREENSHOT=$(CURDIR)/docs/page.png COMPANION_PAGE_SCREENSHOT_NARROW=$(CURDIR)/docs/page-narrow.png \
		$(GO) test -count=1 -run 'TestPageLayout$$' ./e2e/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd $(SDK) && $(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd $(SDK) && $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Binaries for every desktop Canvas ships on, for Electron to bundle:
# pure Go (CGO_ENABLED=0), so each cross-builds from any machine. Names are
# dist/companion-OS-ARCH[.exe]; the version is stamped in (`companion
# version`) and dist/SHA256SUMS lists every file's hash (sha256sum -c).
DIST_TARGETS := darwin/arm64 darwin/amd64 windows/amd64 linux/amd64 linux/arm64

dist: modules
	@rm -rf dist && mkdir -p dist
	@set -e; for t in $(DIST_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; ext=; [ "$$os" = windows ] && ext=.exe; \
		out=dist/companion-$$os-$$arch$$ext; \
		echo "make: building $$out (version $(VERSION))" >&2; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $$out ./cmd/companion; \
	done
	@cd dist && if command -v sha256sum >/dev/null; then sha256sum companion-*; else shasum -a 256 companion-*; fi > SHA256SUMS
	@echo "make: dist/ holds $(words $(DIST_TARGETS)) binaries and SHA256SUMS" >&2

clean:
	rm -rf bin dist .box-image
