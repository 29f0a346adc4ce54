# Spartan RTL. `make rtl` and `make test` are all a new user needs: both create the virtual
# environment (.venv) on first use; the stamp file makes later runs skip that step.
SHELL    := /bin/bash
PYTHON   ?= python3
VENV     := .venv
BIN      := $(CURDIR)/$(VENV)/bin
STAMP    := $(VENV)/.installed
JOBS     ?= 2
RTL_DIR  ?= rtl_out
export PATH := $(BIN):$(PATH)

.PHONY: help venv rtl test test-fast lint waves bench bench-quick clean distclean

help:
	@echo "make rtl     generate every block's Verilog + manifest into $(RTL_DIR)/"
	@echo "make test    the whole regression (Verilator and Icarus)"
	@echo "make lint    verilator --lint-only -Wall on every generated top"
	@echo "make waves   run the monitor testbench with waves on and print where they are"
	@echo "make bench   run every benchmark (make bench-quick: the CI-sized run)"
	@echo "make clean   remove generated Verilog and simulation builds (distclean: and .venv)"

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(STAMP)

rtl: $(STAMP)
	@for block in $$($(BIN)/python -c 'from hw.blocks import BLOCKS; print(*BLOCKS)'); do \
		$(BIN)/spartan generate $$block -o $(RTL_DIR) || exit 1; \
	done

test: $(STAMP)
	$(BIN)/python -m pytest -n $(JOBS) verif

# The amaranth.sim, golden-model and CLI tests only: seconds, no simulator build.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not cocotb" verif

lint: rtl
	$(BIN)/python -m verif.lint $(RTL_DIR)/*.v

waves: $(STAMP)
	$(BIN)/python -m verif.runner waves monitor

bench: $(STAMP)
	$(BIN)/spartan bench --json bench.json

bench-quick: $(STAMP)
	$(BIN)/spartan bench --quick --json bench.json

clean:
	rm -rf sim_build .pytest_cache bench.json
	rm -f $(RTL_DIR)/*.v $(RTL_DIR)/*.json $(RTL_DIR)/*.h

distclean: clean
	rm -rf $(VENV) .hypothesis
