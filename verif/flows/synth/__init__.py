"""Synthesis and place-and-route of every registered block, and the GEMM's figure of merit:
``make synth``.

For each block of :mod:`spartan_rtl.hw.blocks`, at its defaults and at the block's other declared
sizes, the generated Verilog goes through YoWASP Yosys (``synth_ice40`` / ``synth_ecp5``) once per
family and through nextpnr (iCE40 HX8K in the CT256 package; ECP5 LFE5U-25F, or -85F when the 25F is
too small; speed grade 6, the slowest) once per placement seed, ``--seeds`` seeds (1..N). Every tool
runs under ``nice -n 19``; concurrent invocations may synthesise different blocks side by side (a
file lock per block keeps two off the same block).

Jobs, store, failures
    Each tool run is a job of spartan_rtl/synth_jobs.py, the ones ``spartan explore`` runs,
    submitted through spartan_rtl/jobs.py (:class:`Synthesis`): on a Dask ``LocalCluster`` of
    ``--jobs`` worker processes, or on the scheduler of ``--scheduler tcp://HOST:PORT`` (or
    ``DASK_SCHEDULER_ADDRESS``); the dashboard link is printed, and on a terminal a progress
    line shows each stage's jobs done and each running job. The stages: the Verilog of every
    block, size and family (``verilog``), Yosys of each (``netlist``, and ``asic`` for the ASIC
    proxy), then nextpnr (``place``) in rounds, each round every size pair's next device. Every
    result goes into the store (``--store``, default :data:`STORE_PATH`, the one ``spartan
    explore`` uses: the two share the rows of identical Verilog), keyed as docs/explore.md's
    store table says: the report is built from the stored rows, so a rerun computes only what
    the store lacks. A job that fails (a tool's error or time-out) is stored with its reason;
    the run goes on, the build is listed under ``failures`` (and in the page) in place of its
    entry, and the exit status is 1; ``--retry-failed`` runs it again. The tools' own files and
    a JSON cache of each result stay in the work folders under ``build/synth/`` (a placement
    reads its netlist there).

What is measured, and how
    The block is wrapped in a *harness* (:func:`harness_verilog`): every input port bit is
    driven by a flip-flop of one shift chain fed from a single pin, and every output port bit
    is captured by a flip-flop of a signature register (``q <= out ^ (q << 1)``) whose top bit
    is the one output pin. So the chip needs four pins whatever the block's port width (a block
    is meant to sit inside a design, not on pins), nothing is optimised away, and every path
    through the block, including a combinational input-to-output path, is timed register to
    register, as it would be when embedded. Synthesis keeps the hierarchy (``-noflatten``), so
    the LUT/FF/BRAM/DSP counts are the block's own, read from ``stat -json`` of its module; the
    harness's flip-flops (one per port bit) are not in them. The harness does take part in
    placement (in the device utilisation and the fit decision) and in timing.

    On ECP5, a flip-flop that takes a DP16KD's read data straight moves into the block RAM's
    output register before nextpnr (:func:`pack_bram_output_registers`, bram_registers.py): the
    same register in another site, as vendor synthesis places it and Yosys does not. The FF
    column counts it still (Yosys's figure); each seed records how many moved.

    Fmax is nextpnr's post-route figure for ``clk`` with a clock constraint (``--freq``, default
    :data:`TARGET_MHZ`), from its ``--report`` JSON (the log is the fallback), for each seed;
    the report gives the mean, minimum and maximum over the seeds and the slowest seed's
    critical path. Placement depends on the seed, so one seed's Fmax is a sample, not a figure.

Devices
    A size is placed on the first device of its family that takes it. A block with a ``sparse``
    parameter (the GEMM) is compared with its dense-only twin (the same size with
    ``sparse=False``), so the two are placed on the same device: the first that takes both.
    A declared sparse size without a declared twin gets one.

Figure of merit (:func:`figure_of_merit`)
    For every GEMM size beside its twin on the same device: the cycles of ONE tile of
    :data:`TILE_ROWS` rows whose masks are unstructured random (each of the ``k`` bits set with
    probability = density, :data:`MASK_SEED`), from the cycle model
    (``spartan_rtl.golden.gemm.simulate``, which the GEMM's tests prove equal to the RTL); effective
    throughput = dense-equivalent MACs (``rows * k * n``) / cycles * Fmax mean; per 1000 LUT and per
    DSP; and the sparse/dense ratio of each, the *iso-area gain*.

ASIC proxy (:func:`asic_proxy`)
    Technology-independent: Yosys generic synthesis of the block alone, flattened, multipliers
    as logic (no DSP or RAM mapping), memories kept as memories (``memory -nomap``) and reported
    as bits, every flip-flop legalised to a plain D flip-flop (enables and resets become logic),
    ``abc -g cmos2`` (NAND/NOR/NOT), ``stat -tech cmos``: a transistor count in which no area
    can hide inside a hard block.

Columns of the report
    ``LUT``: iCE40 ``SB_LUT4``; ECP5 ``LUT4`` plus two per ``CCU2C`` carry cell (each holds two
    LUT4s). ``FF``: every flip-flop cell. ``BRAM``: ``SB_RAM40_4K`` / ``DP16KD`` (+``PDPW16KD``).
    ``DSP``: ``SB_MAC16`` (none on the HX8K) / ``MULT18X18D`` (+``ALU54B``). ``LUTRAM``: ECP5
    distributed RAM cells ``TRELLIS_DPR16X4``. Every cell type is kept in the JSON.

Sizes
    The defaults plus, if the block's profile (verif/tb/profile.py) declares
    ``synth_sizes = ({"param": value, ...}, ...)``, those, else half and double the default
    ``lanes`` (each only where the parameters are valid). ``--set NAME=VALUE`` (with one block)
    synthesises that one size instead (and its dense-only twin), for a quick look.

The report, built from the store's rows, is merged into ``docs/synth.json`` after each stage
(one entry per block, size and family; entries of sizes no longer declared are dropped) and
rendered to ``docs/synth.md`` (:func:`markdown`; :func:`merit_summary_markdown` is the summary
docs/results.md shows).

Usage: ``python -m verif.flows.synth [BLOCK ...] [--families ice40,ecp5,asic] [--seeds 3] [--jobs 2]
[--scheduler tcp://HOST:PORT] [--store PATH] [--retry-failed] [--freq MHZ] [--defaults-only]
[--set NAME=VALUE ...]``; ``--render-only`` rewrites the page from the JSON.

The package, one module a part: families.py (the FPGA families, their devices, the ASIC proxy),
bram_registers.py (ECP5's pass before placement), sizing.py (the sizes and their twins),
harness.py (the register harness), tools.py (the tool runs and their caches), parse.py (what the
tools wrote), place.py (a size and its twins onto a device), merit.py (the figure of merit, the
targets), report.py (docs/synth.json and docs/synth.md), synthesis.py (a run's jobs on the
executor and the store), cli.py (the command line). Their names are all here too, as
spartan_rtl/synth_jobs.py calls them (``synth.yosys_netlist``).
"""

from __future__ import annotations

from verif.flows import ROOT

from .bram_registers import pack_bram_output_registers
from .cli import main
from .families import ASIC, FAMILIES, Device, Family, SynthError
from .harness import HARNESS, harness_verilog
from .merit import (
    DENSITIES,
    DOUBLE_GEMM_MHZ,
    FMAX_TARGETS,
    MASK_SEED,
    TARGET_FAMILY,
    TILE_ROWS,
    asic_merit,
    figure_of_merit,
    model_cycles,
    random_masks,
    targets,
    twin_pairs,
)
from .parse import (
    ASIC_CELLS,
    asic_stats,
    critical_path,
    fmax_from_log,
    fmax_from_report,
    memories,
    no_fit_reason,
    resources,
    utilisation,
)
from .place import SEEDS, TARGET_MHZ, fmax_stats, normalised, over_capacity, place_groups
from .report import (
    JSON_PATH,
    MARKDOWN_PATH,
    OLDER_PLACEMENT,
    asic_markdown,
    markdown,
    merge,
    merit_markdown,
    merit_summary_markdown,
    targets_table,
)
from .sizing import _lanes_sizes as _lanes_sizes
from .sizing import _tag as _tag
from .sizing import family_values, has_twin, pair_groups, pair_key, sizes, with_twins
from .synthesis import JOBS, STORE_PATH, Build, Synthesis, run
from .tools import (
    ASIC_SCRIPT,
    BUILD,
    FLOW,
    PLACE_FLOW,
    TIMEOUT_S,
    asic_proxy,
    cached_netlist,
    netlist_dir,
    place_seed,
    tool_versions,
    yosys_netlist,
)
from .tools import _generate as _generate

# Every public name of the parts. Three private ones are imported as themselves above, for the
# code that uses them: spartan_rtl/synth_jobs.py generates a block's Verilog with _generate,
# the tests name sizes with _tag and check _lanes_sizes.
__all__ = [
    "ROOT", "main", "pack_bram_output_registers", "ASIC", "FAMILIES", "Device", "Family",
    "SynthError", "HARNESS",
    "harness_verilog", "DENSITIES", "DOUBLE_GEMM_MHZ", "FMAX_TARGETS", "MASK_SEED",
    "TARGET_FAMILY", "TILE_ROWS", "asic_merit", "figure_of_merit", "model_cycles",
    "random_masks", "targets", "twin_pairs", "ASIC_CELLS", "asic_stats", "critical_path",
    "fmax_from_log", "fmax_from_report", "memories", "no_fit_reason", "resources",
    "utilisation", "SEEDS", "TARGET_MHZ", "fmax_stats", "normalised", "over_capacity",
    "place_groups", "JSON_PATH", "MARKDOWN_PATH", "OLDER_PLACEMENT", "asic_markdown",
    "markdown", "merge",
    "merit_markdown", "merit_summary_markdown", "targets_table", "JOBS", "STORE_PATH", "Build",
    "Synthesis", "run", "family_values", "has_twin", "pair_groups", "pair_key", "sizes",
    "with_twins", "ASIC_SCRIPT", "BUILD", "FLOW", "PLACE_FLOW", "TIMEOUT_S", "asic_proxy",
    "cached_netlist", "netlist_dir", "place_seed", "tool_versions", "yosys_netlist",
]
