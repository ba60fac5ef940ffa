# The two commands of the README: `make book` and `make test`.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
JB    := $(VENV)/bin/jupyter-book
STAMP := $(VENV)/.installed
JBFLAGS := -W -n --keep-going

.PHONY: book test test-portable test-wheel gpu-check-quick lab constraints venv outputs clean

venv: $(STAMP)

# torch first, pinned: anything looser pulls a CUDA build with several GB of packages.
$(STAMP): requirements.txt constraints.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -qq torch==2.13.0
	$(PY) -m pip install -qq -r requirements.txt -c constraints.txt
	$(PY) -m pip install -qq --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Rewrites constraints.txt from the venv (every installed package but torch/torchvision and hapref itself).
constraints: $(STAMP)
	{ sed -n '1,3p' constraints.txt; $(PY) -m pip freeze --exclude-editable | grep -v -E '^(torch|torchvision)=='; } \
	    > constraints.new && mv constraints.new constraints.txt

# Opens the chapters in JupyterLab with the venv registered as the kernel "hapref (.venv)" (the lab extra).
lab: $(STAMP)
	$(PY) -m pip install -qq "jupyterlab>=4"
	$(PY) -m ipykernel install --sys-prefix --name hapref --display-name "hapref (.venv)"
	$(VENV)/bin/jupyter lab book/

# Executes every chapter and builds the HTML book; any warning or cell error fails.
book: $(STAMP)
	$(JB) build . $(JBFLAGS)
	@echo "Book: file://$(CURDIR)/_build/html/index.html"

# Package tests + every chapter re-executed and compared by nbval, then the book
# rebuilt from the stored (just checked) outputs, so a broken reference fails too.
# Generated data and features go to a folder of the build, so a fresh clone checks the stored
# outputs against a cold cache (what a new reader gets), never against stale files of this machine.
test: export HAPREF_DATA := $(CURDIR)/_build/hapref-data
test: $(STAMP)
	$(PY) -m pytest tests hapref book --doctest-modules --nbval --nbval-current-env \
	    --nbval-sanitize-with book/nbval-sanitize.cfg -p no:cacheprovider || [ $$? -eq 5 ]
	mkdir -p _build
	sed -e 's/^\(\s*execute_notebooks:\).*/\1 "off"/' \
	    -e 's#^\(\s*hapref_offline:\) book/_ext#\1 $(CURDIR)/book/_ext#' _config.yml > _build/_config.stored.yml
	$(JB) build . $(JBFLAGS) --config _build/_config.stored.yml
	@echo "Book (stored outputs): file://$(CURDIR)/_build/html/index.html"
	# Every page of that build opened in headless Chromium (skips where no Chromium is installed).
	$(PY) -m pytest tests/browser -p no:cacheprovider

# The chapters and tests/test_portable.py under another CPU's arithmetic: ATen's scalar kernels, oneDNN limited
# to SSE4.1, MKL to SSE4.2, and one thread (CI's default is two). The stored outputs must pass here unchanged:
# the chapters compute in float64 on CPUs (hapref.utils.portable_precision), so no digit they print moves.
PORTABLE_ENV := ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41 MKL_ENABLE_INSTRUCTIONS=SSE4_2 OMP_NUM_THREADS=1
test-portable: export HAPREF_DATA := $(CURDIR)/_build/hapref-data-portable
test-portable: $(STAMP)
	rm -rf $(HAPREF_DATA)
	$(PORTABLE_ENV) $(PY) -m pytest tests/test_portable.py book --nbval --nbval-current-env \
	    --nbval-sanitize-with book/nbval-sanitize.cfg -p no:cacheprovider

# A wheel of the checkout installs the way Python users install: into a fresh venv that has only torch, its
# declared dependencies come from the package index, and the package imports and its CLI runs there.
WHEEL_VENV := _build/wheel-venv
test-wheel: $(STAMP)
	rm -rf _build/wheel $(WHEEL_VENV) _build/wheel-run _build/wheel-err.txt
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w _build/wheel .
	rm -rf build  # setuptools' staging folder
	python3 -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install -qq torch==2.13.0
	$(WHEEL_VENV)/bin/python -m pip install -qq _build/wheel/hapref-*.whl
	cd _build && ./wheel-venv/bin/python -c "import hapref, hapref.losses.pml, hapref.search, hapref.train; \
	    print('hapref', hapref.__file__)" | grep -q wheel-venv
	cd _build && ./wheel-venv/bin/python -m hapref.evaluation --help > /dev/null
	cd _build && ./wheel-venv/bin/python -m hapref.train --help > /dev/null
	cd _build && ./wheel-venv/bin/python -m hapref.data.download --help > /dev/null
	cd _build && ./wheel-venv/bin/python -m hapref.data.download list | grep -q "annotations: "
	cd _build && ./wheel-venv/bin/python -m hapref.features --help > /dev/null
	# without the data extra a smoke run names the extra to install; with it, the run trains
	cd _build && ! ./wheel-venv/bin/python -m hapref.train radial --profile smoke --out wheel-run 2> wheel-err.txt
	grep -q "pip install 'hapref\[data\]'" _build/wheel-err.txt
	$(WHEEL_VENV)/bin/python -m pip install -qq "$$(ls _build/wheel/hapref-*.whl)[data]" -c constraints.txt
	cd _build && HAPREF_DATA=$(CURDIR)/_build/wheel-data ./wheel-venv/bin/python -m hapref.train radial \
	    --profile smoke --out wheel-run --force --no-progress > /dev/null
	@echo "wheel: installs and imports in a fresh venv"

# benchmarks/gpu_check.py end to end on the CPU (smoke profiles, scaled shapes; under 3 minutes on 2 cores): the
# autocast tests, AMP training of every pipeline, full-profile step rates and the throughput comparisons.
gpu-check-quick: export HAPREF_DATA := $(CURDIR)/_build/hapref-data
gpu-check-quick: $(STAMP)
	mkdir -p _build
	$(PY) benchmarks/gpu_check.py --device cpu --quick --out _build/gpu-check-cpu.json

# Re-executes chapters in place, each against its own cold data cache, to refresh the stored outputs that
# `make test` checks: `make outputs` or `make outputs CHAPTERS=book/03_comparing_videos.ipynb`.
CHAPTERS ?= $(wildcard book/*.ipynb)
outputs: $(STAMP)
	for nb in $(CHAPTERS); do \
	    d=$$(mktemp -d) && HAPREF_DATA=$$d $(VENV)/bin/jupyter-execute --inplace $$nb; rc=$$?; rm -rf $$d; \
	    [ $$rc -eq 0 ] || exit $$rc; \
	done

clean:
	rm -rf _build
