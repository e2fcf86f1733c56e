# Two entry points (README): `make demo` runs the tour, `make test` runs
# every test. Both create .venv on a fresh machine and install what they
# need, printing one line per step (commands themselves stay quiet; a failing
# step prints its output).
#
# .venv only ever holds the release build that `make demo` installs (the
# benchmarks measure it and refuse anything else). `make test` installs that
# same build, then runs the Python suite against a separate debug,
# fault-injection build of the extension in build/test, staged by tools/dev
# and put first on sys.path, never installed.

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
# The CPU build of PyTorch lies on local disk on our machines.
FIND_LINKS = $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
BUILD_TOOLS = "meson-python>=0.15" "meson>=1.1" ninja
TEST_DEPS = pytest hypothesis "numpy>=2.3" torch==2.13.0 mypy tqdm tensorstore==0.1.86 "moto[server]" boto3
TEST_BUILD = build/test

.PHONY: demo test test-c test-c-examples test-python install-test install-demo fuzz clean

$(PY):
	@echo "==> creating the virtual environment $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@echo "==> installing the build tools (pip, meson, meson-python, ninja) into $(VENV)"
	@$(PIP) install --quiet --upgrade pip
	@$(PIP) install --quiet $(BUILD_TOOLS)

install-demo: $(PY)
	@echo "==> building strideweave (release) and installing it into $(VENV)"
	@$(PIP) install --quiet --no-build-isolation .

# The tour needs NumPy only; its PyTorch part runs when torch is installed
# (`make test` installs it), so a fresh machine never pulls a PyTorch build.
demo: install-demo
	@echo "==> installing numpy into $(VENV)"
	@$(PIP) install --quiet "numpy>=2.3"
	@echo "==> running examples/tour.py"
	@$(PY) examples/tour.py

install-test: install-demo
	@echo "==> installing the test dependencies (pytest, hypothesis, numpy, torch) into $(VENV)"
	@$(PIP) install --quiet $(FIND_LINKS) $(TEST_DEPS)

# C unit tests of libstrideweave, built without the extension.
test-c: $(PY)
	@echo "==> building the C unit tests (build/c-test: debug, fault injection)"
	@rm -rf build/c-test
	@PATH=$(abspath $(VENV))/bin:$$PATH meson setup build/c-test \
		-Dpython=false -Dfault_injection=true -Dbuildtype=debug >/dev/null
	@PATH=$(abspath $(VENV))/bin:$$PATH meson compile -C build/c-test >/dev/null \
		|| PATH=$(abspath $(VENV))/bin:$$PATH meson compile -C build/c-test
	@echo "==> running the C unit tests"
	@PATH=$(abspath $(VENV))/bin:$$PATH meson test -C build/c-test --print-errorlogs
	@$(MAKE) --no-print-directory test-c-examples

# The C examples built the README's way, against a copy of libstrideweave
# installed (`meson install`) into a temporary prefix.
test-c-examples: $(PY)
	@echo "==> installing libstrideweave into a temporary prefix; building and running examples/c"
	@PATH=$(abspath $(VENV))/bin:$$PATH tools/test-c-examples

test-python: install-test
	@echo "==> building the test build of the extension ($(TEST_BUILD): debug, fault injection)"
	@SW_BUILD_DIR=$(TEST_BUILD) tools/dev python -c "import strideweave"
	@echo "==> checking that the binding's files gain no new circle, open or behind a registration (tools/check-binding-layers)"
	@NM=nm tools/check-binding-layers $(TEST_BUILD)/_C.*.so.p \
		--core $(TEST_BUILD)/libstrideweave_core.a.p
	@echo "==> running the Python tests against $(TEST_BUILD)"
	@SW_BUILD_DIR=$(TEST_BUILD) tools/dev pytest -q tests/python

test: test-c test-python

# A longer run of the API fuzz harness and the thread stress test than the
# test suite does (FUZZ_EXAMPLES per target, STRESS_SECONDS).
FUZZ_EXAMPLES ?= 3000
STRESS_SECONDS ?= 60
fuzz: install-test
	@STRIDEWEAVE_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) STRIDEWEAVE_STRESS_SECONDS=$(STRESS_SECONDS) \
		$(PY) -m pytest -q -s -p no:cacheprovider tests/python/test_fuzz_api.py \
		tests/python/test_stress_threads.py

clean:
	@rm -rf build $(VENV)
