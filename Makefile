# Spartan RTL. `make rtl` and `make test` are all a new user needs: both create the virtual
# environment (.venv) on first use; the stamp file makes later runs skip that step.
SHELL    := /bin/bash
PYTHON   ?= python3
VENV     := .venv
BIN      := $(CURDIR)/$(VENV)/bin
STAMP    := $(VENV)/.installed
# The project installs editable in strict mode: a tree of links (build/__editable__.*) to the
# files of the folders pyproject's [tool.setuptools.package-dir] maps into spartan_rtl, which IDEs
# and static analysers follow (the default mode's import hook hides them). The links are made at
# install time, so the stamp also depends on the list of those folders' Python files: adding or
# removing a module reinstalls (the list file changes only then).
INSTALL  := -m pip install --quiet --config-settings editable_mode=strict -e
PACKAGE_DIRS := $(shell sed -n '/^\[tool\.setuptools\.package-dir\]/,/^\[/s/^"[^"]*" *= *"\([^"]*\)".*/\1/p' pyproject.toml)
MODULES  := $(VENV)/.modules
JOBS     ?= 2
RTL_DIR  ?= rtl_out
# Extra options of every `spartan generate` of `make rtl`, e.g. RTL_FLAGS='--clock-mhz 200 --axi-names'.
RTL_FLAGS ?=
export PATH := $(BIN):$(PATH)

.PHONY: FORCE help venv rtl test test-fast lint waves waves-docs docs-registers bench bench-quick synth area-model traces mutants coverage fuzz clean distclean formal

help:
	@echo "make rtl     generate every block's Verilog + manifest into $(RTL_DIR)/"
	@echo "make test    the whole regression (Verilator and Icarus)"
	@echo "make test-fast  no cocotb simulations: amaranth.sim, golden, fuzz, formal-flow, CLI (~1 min)"
	@echo "make lint    ruff, the import contracts (import-linter) and verilator --lint-only -Wall"
	@echo "             on every generated top"
	@echo "make waves   spartan sim BLOCK (default monitor): waves/BLOCK/dump.vcd + .gtkw"
	@echo "make waves-docs  redraw docs/img/waves_<block>.png for every block"
	@echo "make docs-registers  rewrite docs/registers.md from the core's register map (PeakRDL)"
	@echo "make bench   run every benchmark (make bench-quick: the CI-sized run)"
	@echo "make synth   Yosys + nextpnr (iCE40 HX8K, ECP5; 3 placement seeds) of every block, the GEMM's"
	@echo "             figure of merit and ASIC proxy: docs/synth.md (SYNTH_ARGS=\"gemm --families ecp5,asic\")"
	@echo "             jobs on a Dask LocalCluster of JOBS workers (SYNTH_ARGS=\"--scheduler tcp://HOST:PORT\"),"
	@echo "             results kept in build/explore.sqlite (the store spartan explore shares)"
	@echo "make area-model  synthesise (and place 6 of) the builds spartan explore's area and clock model"
	@echo "             is fitted on, print its errors, rewrite docs/area_model.json (AREA_ARGS)"
	@echo "make formal  k-induction proofs (else BMC) of every block's outputs and invariants: docs/formal.md"
	@echo "make traces  retrain the digits CNN and rewrite data/traces/ (real activations)"
	@echo "make mutants fault injection: mutants of the emitted Verilog vs the tests: docs/mutants.md"
	@echo "             each a job on a Dask LocalCluster of JOBS workers (MUTANTS_ARGS=\"--scheduler tcp://HOST:PORT\"),"
	@echo "             verdicts kept in build/explore.sqlite (MUTANTS_ARGS=\"engine core\", \"--rerun-survivors\")"
	@echo "make coverage  Verilator line + toggle coverage of the regression: docs/coverage.md"
	@echo "make fuzz    property-based fuzzing, long profile (make test runs the fast one)"
	@echo "make clean   remove generated Verilog and simulation builds (distclean: and .venv)"

$(STAMP): pyproject.toml $(MODULES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python $(INSTALL) '.[test]'
	touch $@

$(MODULES): FORCE
	@mkdir -p $(VENV)
	@find $(PACKAGE_DIRS) -name '*.py' -not -path '*/__pycache__/*' | LC_ALL=C sort > $@.new
	@if cmp -s $@.new $@; then rm $@.new; else mv $@.new $@; fi

FORCE:

venv: $(STAMP)

rtl: $(STAMP)
	@for block in $$($(BIN)/python -c 'from spartan_rtl.hw.blocks import BLOCKS; print(*BLOCKS)'); do \
		$(BIN)/spartan generate $$block -o $(RTL_DIR) $(RTL_FLAGS) || exit 1; \
	done

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) verif/tests

# The amaranth.sim, golden-model and CLI tests only: seconds, no simulator build.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) -m "not cocotb" verif/tests

# Property-based fuzzing (verif/tests/test_fuzz.py) with the long profile: random examples, many
# more than the fast profile of `make test`; failures are kept in .hypothesis/ and replayed
# first on the next run (docs/verification.md, "Property-based fuzzing").
fuzz: $(STAMP)
	HYPOTHESIS_PROFILE=long $(BIN)/python -m pytest -n $(JOBS) verif/tests/test_fuzz.py \
		--hypothesis-show-statistics

# The Python (ruff: [tool.ruff]), its import layering (import-linter: [tool.importlinter], run by
# verif/flows/imports.py over the tree laid out as it is imported), then the generated Verilog.
lint: rtl
	$(BIN)/ruff check .
	$(BIN)/python -m verif.flows.imports --no-logo
	$(BIN)/python -m verif.flows.lint $(filter-out %_inst.v,$(wildcard $(RTL_DIR)/*.v))

BLOCK ?= monitor
waves: $(STAMP)
	$(BIN)/spartan sim $(BLOCK)

# docs/registers.md: PeakRDL-markdown of the default core's register map (hw/registers.py).
docs-registers: $(STAMP)
	$(BIN)/python -m verif.flows.docs_registers docs/registers.md

# The pictures of docs/waveforms.md: each block's standard stimulus, fixed seed, the busiest
# 48 cycles; every block with AXI4-Stream ports (the engine has none: its memory side is an
# AXI4 master, whose handshakes --busiest does not read).
WAVES_BLOCKS := from spartan_rtl.hw.blocks import BLOCKS; print(*(n for n, b in BLOCKS.items() \
	if any(m.startswith(("s_axis", "m_axis")) for m in b.build().signature.members)))
waves-docs: $(STAMP)
	@for block in $$($(BIN)/python -c '$(WAVES_BLOCKS)'); do \
		$(BIN)/spartan sim $$block --seed 1 --cycles 2000 -o waves/$$block > /dev/null \
			&& $(BIN)/spartan waves waves/$$block/dump.vcd --busiest -o docs/img/waves_$$block.png \
			|| exit 1; \
	done

# Every benchmark at full size, then docs/results.md rendered from its figures.
bench: $(STAMP)
	$(BIN)/spartan bench --json bench.json
	$(BIN)/python -m verif.flows.results bench.json

bench-quick: $(STAMP)
	$(BIN)/spartan bench --quick --json bench.json

# Synthesis: slow (minutes per block), never part of `make test`. YoWASP's compiled-tool
# cache stays inside the tree (.cache/, ignored). The jobs run on Dask (the explore extra), each
# result kept in the store `spartan explore` uses (docs/explore.md#the-store).
SYNTH_STAMP := $(VENV)/.installed-synth
$(SYNTH_STAMP): $(STAMP)
	$(BIN)/python $(INSTALL) '.[synth,explore]'
	touch $@

synth: $(SYNTH_STAMP)
	YOWASP_CACHE_DIR=$(CURDIR)/.cache/yowasp XDG_CACHE_HOME=$(CURDIR)/.cache \
		nice -n 19 $(BIN)/python -m verif.flows.synth --jobs $(JOBS) $(SYNTH_ARGS)

# Model checks of every block (SymbiYosys + Yices, minutes): k-induction proofs where they
# close, BMC to a stated depth elsewhere; docs/formal.md.
FORMAL_STAMP := $(VENV)/.installed-formal
$(FORMAL_STAMP): $(STAMP)
	$(BIN)/python $(INSTALL) '.[formal]'
	touch $@

formal: $(FORMAL_STAMP)
	YOWASP_CACHE_DIR=$(CURDIR)/.cache/yowasp $(BIN)/python -m verif.flows.formal

TRACES_STAMP := $(VENV)/.installed-traces
$(TRACES_STAMP): $(STAMP)
	$(BIN)/python $(INSTALL) '.[traces]'
	touch $@

traces: $(TRACES_STAMP)
	$(BIN)/python -m verif.flows.capture_traces

# Fault injection (~50 min on 2 shared cores): mutants of each block's Verilog against its cocotb
# tests; never part of `make test` (verif/tests/test_mutants.py checks the generator there). Each
# mutant is a job on Dask (the test extra has it), its verdict kept in the store that synth and
# spartan explore use (docs/explore.md#the-store): a rerun evaluates only what changed.
# The area and clock model's rows (about 45 min on 2 cores, most of it Yosys on the
# acc_rows=1024 builds): netlists and placements from the store spartan explore shares.
area-model: $(SYNTH_STAMP)
	YOWASP_CACHE_DIR=$(CURDIR)/.cache/yowasp XDG_CACHE_HOME=$(CURDIR)/.cache \
		nice -n 19 $(BIN)/python -m verif.flows.area_model --jobs $(JOBS) --place 6 --write \
		$(AREA_ARGS)

mutants: $(STAMP)
	nice -n 5 $(BIN)/python -m verif.flows.mutants --jobs $(JOBS) $(MUTANTS_ARGS)

# Coverage (~10 min on 2 cores): the Verilator half of the cocotb regression on coverage
# builds (their own sim_build/<block>/verilator-cov-* directories), merged per block.
coverage: $(STAMP)
	nice -n 5 $(BIN)/python -m verif.flows.coverage --jobs $(JOBS)

clean:
	rm -rf sim_build .pytest_cache bench.json
	rm -f $(RTL_DIR)/*.v $(RTL_DIR)/*.json $(RTL_DIR)/*.h $(RTL_DIR)/*.rdl $(RTL_DIR)/*.ipxact.xml $(RTL_DIR)/*_regs.md \
		$(RTL_DIR)/*.core $(RTL_DIR)/*.f $(RTL_DIR)/*.sdc $(RTL_DIR)/*.xdc

distclean: clean
	rm -rf $(VENV) .hypothesis build/__editable__.*
