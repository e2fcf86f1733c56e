# Two entry points (README): `make demo` runs the tour, `make test` runs
# every test. Both create .venv on a fresh machine and install what they need.

PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
# The CPU build of PyTorch lies on local disk on our machines.
FIND_LINKS = $(if $(wildcard /opt/wheels),--find-links /opt/wheels,)
BUILD_TOOLS = "meson-python>=0.15" "meson>=1.1" ninja
TEST_DEPS = pytest hypothesis "numpy>=2.3" torch==2.13.0

.PHONY: demo test test-c test-python install-test install-demo clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	$(PIP) install --quiet $(BUILD_TOOLS)

install-demo: $(PY)
	$(PIP) install --quiet --no-build-isolation .

demo: install-demo
	$(PIP) install --quiet $(FIND_LINKS) "numpy>=2.3" torch==2.13.0
	$(PY) examples/tour.py

install-test: $(PY)
	$(PIP) install --quiet $(FIND_LINKS) $(TEST_DEPS)
	$(PIP) install --quiet --no-build-isolation \
		-Csetup-args=-Dfault_injection=true -Cbuild-dir=build/pip-test .

# C unit tests of libstrideweave, built without the extension.
test-c: $(PY)
	rm -rf build/c-test
	PATH=$(abspath $(VENV))/bin:$$PATH meson setup build/c-test \
		-Dpython=false -Dfault_injection=true -Dbuildtype=debug >/dev/null
	PATH=$(abspath $(VENV))/bin:$$PATH meson test -C build/c-test --print-errorlogs

test-python: install-test
	$(PY) -m pytest -q -p no:cacheprovider tests/python

test: test-c test-python

clean:
	rm -rf build $(VENV)
