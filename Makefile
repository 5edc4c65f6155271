# The README's two commands, from a fresh clone:
#   make verify   the main job: the proof on vLLM 0.27.1 (dspark-attn-plugin verify)
#   make test     the test suite (what .ci/run runs)
# Both build what they need: a venv with vLLM 0.27.1 (cached outside the
# clone, keyed on tests/requirements.txt), then the sdist and wheel, checked,
# then the built wheel installed into that venv (never the source tree).
# Each build step prints one line; its output goes to a log under
# .build-logs/, printed (its end) and named only when the step fails.

PYTHON ?= python3
CACHE ?= $(HOME)/.cache/dspark-attn-plugin
REQUIREMENTS := tests/requirements.txt
KEY := $(shell $(PYTHON) -c "import hashlib,sys; print(hashlib.sha256(open('$(REQUIREMENTS)','rb').read() + sys.version.encode()).hexdigest()[:12])")
VENV ?= $(CACHE)/venv-$(KEY)
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Where torch's CPU build comes from, when pip would otherwise take the CUDA
# one: e.g. TORCH_INDEX=https://download.pytorch.org/whl/cpu (unset: pip's
# own configuration decides).
TORCH_INDEX ?=
LOGS := .build-logs
export DSPARK_ATTN_PLUGIN_CACHE := $(CACHE)

# $(call quietly,NAME,WHAT,COMMANDS): run COMMANDS with their output in
# $(LOGS)/NAME.log; say WHAT on one line; on failure show the log's end.
define quietly
	@mkdir -p $(LOGS); printf '%s ... ' "$(2)"; \
	if ( $(3) ) > $(LOGS)/$(1).log 2>&1; then echo done; \
	else rc=$$?; echo FAILED; tail -n 30 $(LOGS)/$(1).log >&2; \
	echo "$(2) failed (exit $$rc); full log: $(CURDIR)/$(LOGS)/$(1).log" >&2; exit $$rc; fi
endef

.PHONY: venv dist wheel install test verify bench bench-diagnose mutants mutation-score fuzz clean

# No prerequisite: the venv's name already carries a hash of the requirements
# (a fresh clone's new file times must not force a rebuild).
$(VENV)/.ready:
	$(call quietly,venv,Building the test venv in $(VENV) (first time: ~4 min and ~5.6 GB),\
	rm -rf "$(VENV)" && $(PYTHON) -m venv "$(VENV)" && \
	$(BIN)/python -m pip install --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) -r $(REQUIREMENTS) && \
	$(BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec)
	@# (PyPI's torchvision/torchaudio/torchcodec need a CUDA torch and break `import vllm` on a CPU.)
	@touch "$@"

venv: $(VENV)/.ready

dist: venv
	$(call quietly,dist,Building and checking the sdist and wheel,\
	rm -rf dist build && $(BIN)/python -m build --no-isolation --outdir dist . && \
	$(BIN)/twine check --strict dist/* && $(BIN)/python .ci/check_wheel.py dist/*.whl)

install: dist
	$(call quietly,install,Installing the built wheel into the venv,\
	$(BIN)/python -m pip install --disable-pip-version-check --force-reinstall --no-deps dist/*.whl)

# pytest exits 5 when it collected no test: that is a failure here.
test: install
	@$(BIN)/python -m pytest --forked $(PYTEST_ARGS) tests; rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no test: failing" >&2; exit 1; fi; exit $$rc

verify: install
	@$(BIN)/dspark-attn-plugin verify

bench: install
	@$(BIN)/python benchmarks/bench_plugin.py $(BENCH_ARGS)

bench-diagnose: install
	@$(BIN)/python benchmarks/bench_diagnose.py $(BENCH_ARGS)

# Break the plugin on purpose (tests/mutation_check.py): every mutation must
# make at least one offline test fail. Hours on two cores (a mutant that only
# a late test catches runs most of the suite); not part of `make test`.
mutants: install
	@$(BIN)/python tests/mutation_check.py $(MUTANTS_ARGS)

# Cosmic Ray over the judging modules (tests/mutation_score.py): each mutant
# against the tests that execute its lines; resumes where it stopped; the
# results in benchmarks/results/mutation-score/. Hours; not part of `make test`.
MUTATION_MODULES ?=
MUTATION_ARGS ?=
mutation-score: install
	$(call quietly,mutation-tools,Installing Cosmic Ray and coverage into the venv,\
	$(BIN)/python -m pip install --disable-pip-version-check -r tests/mutation_requirements.txt)
	@$(BIN)/python tests/mutation_score.py run $(MUTATION_ARGS) $(MUTATION_MODULES)

# Generated flashmla variants, executed (tests/fuzz_variants.py): thousands of
# examples, the tally in FUZZ_JSON. `make test` runs a few hundred of them.
FUZZ_EXAMPLES ?= 5000
FUZZ_JSON ?= benchmarks/results/fuzz-$(shell date +%Y-%m-%d).json
fuzz: install
	@$(BIN)/python tests/fuzz_variants.py --examples $(FUZZ_EXAMPLES) --json $(FUZZ_JSON)

# The plugin's wheel alone, with nothing but pip (no vLLM venv): dist/.
wheel:
	$(call quietly,wheel,Building the wheel into dist/,\
	rm -rf dist build && $(PYTHON) -m pip wheel --no-deps --disable-pip-version-check -w dist .)
	@ls dist/*.whl

clean:
	rm -rf dist build src/*.egg-info $(LOGS)
