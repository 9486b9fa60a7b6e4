# Tessera's front door. `make demo` and `make test` install what is missing
# (Debian packages), configure, build and run. See README.md.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
MESON_ARGS ?=
export PATH := /usr/local/cuda/bin:$(PATH)

DEB_PACKAGES = meson ninja-build pkg-config gcc libopenblas-dev liblapacke-dev \
               libhwloc-dev libnuma-dev libjemalloc-dev libcriterion-dev \
               libstarpu-dev
# Only for the plots of bench-sched (kept out of the test path: CI is faster).
PLOT_PACKAGES = python3-matplotlib

.PHONY: all deps build test demo sanitize asan tsan bench-runtime bench-kernels bench-offload \
        bench-sched \
        install clean

all: build

# Install only what is missing; apt-get needs root (CI and these machines are).
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) $(MESON_ARGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build
	tests/run-suite.sh $(BUILD)

demo: build
	$(BUILD)/examples/tessera-cholesky

# Sanitizer builds of the suite (CUDA off: nvcc does not take -fsanitize).
$(ASAN_BUILD)/build.ninja: | deps
	meson setup $(ASAN_BUILD) -Dcuda=disabled -Dstarpu=disabled -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dbuildtype=debugoptimized
$(TSAN_BUILD)/build.ninja: | deps
	meson setup $(TSAN_BUILD) -Dcuda=disabled -Dstarpu=disabled -Db_sanitize=thread \
	  -Db_lundef=false -Dbuildtype=debugoptimized

asan: deps $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	ASAN_OPTIONS=detect_leaks=1 tests/run-suite.sh $(ASAN_BUILD)

tsan: deps $(TSAN_BUILD)/build.ninja
	ninja -C $(TSAN_BUILD)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" tests/run-suite.sh $(TSAN_BUILD)

sanitize: asan tsan

bench-runtime: build
	$(BUILD)/bench/runtime/tessera-bench-runtime

bench-kernels: build
	$(BUILD)/bench/kernels/tessera-bench-kernels

bench-offload: build
	$(BUILD)/bench/offload/tessera-bench-offload

# Scheduling policies on four graphs, Tessera and StarPU; then the plots
# (drawn even when a row failed; the benchmark's status is kept).
bench-sched: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(PLOT_PACKAGES)"
	status=0; $(BUILD)/bench/sched/tessera-bench-sched --out=$(BUILD)/bench/sched || status=$$?; \
	/usr/bin/python3 bench/sched/plot.py $(BUILD)/bench/sched/results.json; exit $$status

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD)
