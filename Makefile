# tessel: the two commands of README.md.
#   make demo   set up, build, generate a model, compile and run it, print outputs and time
#   make test   set up, build, run every test (GPU tests are reported as skipped without a GPU)
BUILD ?= build
JOBS ?= $(shell nproc)
# The Python module is built and tested with the rest (its objects are the library's own).
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTESSEL_PYTHON_MODULE=ON

.PHONY: setup configure build demo test clean

setup:
	bash scripts/setup.sh

configure: setup
	mkdir -p $(BUILD)
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS) > $(BUILD)/configure.log 2>&1 || (cat $(BUILD)/configure.log; exit 1)

build: configure
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	bash scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

clean:
	rm -rf $(BUILD)
