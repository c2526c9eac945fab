# One-command entry points. Everything builds a Release tree in build/.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all configure build test demo bench sanitize fuzz deps clean format install python

all: build

deps:
	@sh scripts/install-deps.sh

configure:
	@sh scripts/install-deps.sh --check-only || sh scripts/install-deps.sh
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The Python package: the extension module and its Python files in
# $(BUILD)/python (PYTHONPATH=$(BUILD)/python; docs/python.md). `make test`
# runs its pytest suite; pip install ./python --no-build-isolation installs it.
python: configure
	cmake --build $(BUILD) --target python -j $(JOBS)

# make install PREFIX=/opt/pyramesh: header, libpyramesh.a and .so, the CLI
# and its man page, pkg-config and CMake package files.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

demo: build
	./$(BUILD)/pyramesh demo

bench: build
	sh bench/run.sh $(BUILD)

# Tests again under AddressSanitizer + UndefinedBehaviorSanitizer (-O1).
sanitize:
	cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPM_SANITIZE=ON -DPM_ENABLE_CUDA=OFF -DPM_BUILD_BENCH=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS)

FUZZ_SECONDS ?= 10
fuzz:
	sh scripts/install-deps.sh --fuzz
	CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DPM_FUZZ=ON -DPM_ENABLE_CUDA=OFF -DPM_WITH_GDCM=ON -DPM_BUILD_TESTS=OFF -DPM_BUILD_BENCH=OFF
	cmake --build build-fuzz -j $(JOBS)
	sh fuzz/run.sh build-fuzz $(FUZZ_SECONDS)

format:
	clang-format -i include/*.h src/*/*.c src/*/*.h src/*/*.cu src/*/*.cuh tools/*.c tools/*.h tests/*.c tests/*.h bench/*.c bench/*.cu fuzz/*.c fuzz/*.h

clean:
	rm -rf $(BUILD) build-asan build-fuzz
