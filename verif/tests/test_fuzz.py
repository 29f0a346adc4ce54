"""Property-based fuzzing (hypothesis, strategies and drivers in verif/tests/fuzz.py).

Per block, a valid parameter set drawn from its declared ranges and rules, and random stimulus
(tiles of random shape and density, all-zero and all-dense ones often; random idle cycles with
garbage payloads on every input; random back-pressure on every output), run in amaranth.sim:
every output element equals the golden model's, outputs are AXI4-Stream stable and nothing is
lost, duplicated or invented. And invalid parameter sets drawn at random: each is rejected with
the documented "<name> must be <what>, not <value>" error, by ``Block.resolve``, by the
component's constructor and by ``spartan generate`` (one line on stderr, exit status 2,
nothing written).

``HYPOTHESIS_PROFILE=long`` (``make fuzz``) runs many more examples; see docs/verification.md.
"""

import contextlib
import io
import json
import re

import pytest
from hypothesis import assume, event, given, note, settings
from hypothesis import strategies as st

from spartan_rtl import cli
from spartan_rtl.golden.compactor import encode_stream, encode_tile, expand_stream
from spartan_rtl.golden.core import EVENT_COUNTERS, CoreModel
from spartan_rtl.golden.formats import pack_beat, random_elements, unpack_beat
from spartan_rtl.golden.gemm import GemmTiming, gemm, row_passes
from spartan_rtl.golden.monitor import tile_stats
from spartan_rtl.hw import blocks
from spartan_rtl.hw.compactor import Compactor
from spartan_rtl.hw.core import SpartanCore
from spartan_rtl.hw.expander import Expander
from spartan_rtl.hw.gemm import SparseGemm
from spartan_rtl.hw.monitor import SparsityMonitor
from verif.tests.amsim import axil_read, axil_write
from verif.tests.fuzz import (
    VALID_PARAMS,
    count_pulses,
    declared_range,
    densities,
    examples,
    expected_error,
    in_declared_range,
    invalid_value,
    powers_of_two,
    rates,
    receive,
    rngs,
    run,
    seeds,
    send,
)

BLOCK_NAMES = list(blocks.BLOCKS)


def ints(values):
    return [int(x) for x in values]


# --- monitor ------------------------------------------------------------------------------

@settings(max_examples=examples("monitor"))
@given(p=VALID_PARAMS["monitor"], seed=seeds, idle=rates, bp=rates, stats_bp=rates,
       tiles=st.lists(st.tuples(st.integers(1, 10), densities, st.integers(0, 255)),
                      min_size=1, max_size=6))
def test_monitor(p, tiles, idle, bp, stats_bp, seed):
    """Beats pass unchanged; one record per tile equal to golden/monitor.py's, the threshold
    taken from the tile's first beat (garbage on the port at every other beat)."""
    blocks.get("monitor").resolve(p)
    rng, np_rng = rngs(seed)
    lanes, width, fmt = p["lanes"], p["width"], p["number_format"]
    dut = SparsityMonitor(**p)
    raw = [random_elements(np_rng, (beats, lanes), width, density, fmt)
           for beats, density, _ in tiles]
    beats, firsts = [], {}
    for tile, (_, _, threshold) in zip(raw, tiles):
        firsts[len(beats)] = threshold
        beats += [{"data": ints(row), "last": int(i == len(tile) - 1)}
                  for i, row in enumerate(tile)]
    result = {}

    def threshold(ctx, i):
        ctx.set(dut.threshold, firsts[i] if i in firsts else rng.randrange(256))

    async def source(ctx):
        await send(ctx, dut.s_axis, beats, rng, idle, before=threshold)

    async def data_sink(ctx):
        result["data"] = await receive(ctx, dut.m_axis, len(beats), rng, bp, name="m_axis")

    async def stats_sink(ctx):
        result["stats"] = await receive(ctx, dut.m_axis_stats, len(tiles), rng, stats_bp,
                                        name="m_axis_stats")

    run(dut, [source, data_sink, stats_sink], cycles=40 * len(beats) + 200)
    assert [{"data": ints(b.data), "last": b.last} for b in result["data"]] == beats
    for t, (tile, (_, _, thr), got) in enumerate(zip(raw, tiles, result["stats"])):
        want = tile_stats(tile, thr, width=width, number_format=fmt,
                          max_tile_elems=p["max_tile_elems"])
        assert (got.data.nnz, got.data.elems, got.data.zero_beats, got.data.sparse) == \
            (want.nnz, want.elems, want.zero_beats, want.sparse), f"tile {t}"
    event(f"saturated: {any(t.size > p['max_tile_elems'] for t in raw)}")


# --- compactor and expander ---------------------------------------------------------------

def dense_beats(p, tiles, np_rng):
    """Dense ``(tdata, tlast, tuser)`` beats: per tile ``(rows, density, bypass, cut)``; a
    ``cut`` that is not a multiple of the row's beats ends the tile's last row that many beats
    early (a malformed row)."""
    lanes, width, cols, fmt = p["lanes"], p["width"], p["cols"], p["number_format"]
    per_row = cols // lanes
    beats = []
    for rows, density, bypass, cut in tiles:
        raw = random_elements(np_rng, (rows * per_row - cut % per_row, lanes), width, density,
                              fmt)
        beats += [(pack_beat(r, width), int(i == len(raw) - 1), int(bypass) if i == 0 else 0)
                  for i, r in enumerate(raw)]
    return beats


zvc_tiles = st.lists(st.tuples(st.integers(1, 3), densities, st.booleans(),
                               st.one_of(st.just(0), st.integers(0, 5))),
                     min_size=1, max_size=5)


@settings(max_examples=examples("compactor"))
@given(p=VALID_PARAMS["compactor"], tiles=zvc_tiles, seed=seeds, idle=rates, mask_bp=rates,
       data_bp=rates)
def test_compactor(p, tiles, seed, idle, mask_bp, data_bp):
    """Masks, packed data (and their tlast) and error pulses equal golden/compactor.py's
    ``encode_stream``, bypass and malformed rows included."""
    blocks.get("compactor").resolve(p)
    rng, np_rng = rngs(seed)
    lanes, width = p["lanes"], p["width"]
    beats = dense_beats(p, tiles, np_rng)
    masks, data, errors = encode_stream(beats, **p)
    dut = Compactor(**p)
    result = {"errors": 0}

    async def source(ctx):
        await send(ctx, dut.s_axis, [{"data": ints(unpack_beat(t, lanes, width)), "last": last,
                                      "user": {"bypass": user}} for t, last, user in beats],
                   rng, idle)

    async def mask_sink(ctx):
        result["masks"] = await receive(ctx, dut.m_axis_mask, len(masks), rng, mask_bp,
                                        name="m_axis_mask")

    async def data_sink(ctx):
        result["data"] = await receive(ctx, dut.m_axis_data, len(data), rng, data_bp,
                                       name="m_axis_data")

    run(dut, [source, mask_sink, data_sink], [count_pulses(dut.error, result, "errors")],
        cycles=40 * (len(beats) + 50))
    assert [(int(b.data), int(b.last)) for b in result["masks"]] == masks
    assert [(pack_beat(ints(b.data), width), int(b.last)) for b in result["data"]] == data
    assert result["errors"] == errors
    event(f"malformed rows: {min(errors, 2)}")


@settings(max_examples=examples("expander"))
@given(p=VALID_PARAMS["expander"], tiles=zvc_tiles, seed=seeds, idle=rates, bp=rates,
       flips=st.lists(st.integers(0, 10 ** 6), max_size=2),
       drop=st.one_of(st.none(), st.integers(0, 10 ** 6)))
def test_expander(p, tiles, seed, idle, bp, flips, drop):
    """Dense rows equal golden/compactor.py's ``expand_stream`` of the compactor's golden
    output, also with data tlast bits flipped (error pulses counted) or a data beat dropped
    (the rows after it shift; the last waits for data that never comes)."""
    blocks.get("expander").resolve(p)
    rng, np_rng = rngs(seed)
    lanes, width, cols = p["lanes"], p["width"], p["cols"]
    masks, data, _ = encode_stream(dense_beats(p, tiles, np_rng), **p)
    for f in flips:
        if data:
            i = f % len(data)
            data[i] = (data[i][0], 1 - data[i][1])
    if drop is not None and data:
        del data[drop % len(data)]
    expected, errors = expand_stream(masks, data, lanes=lanes, width=width, cols=cols)
    dut = Expander(**p)
    result = {"errors": 0}

    # With a beat dropped, the row missing it waits for data that never comes: the sources
    # give up once the complete rows are out, and that row may have sent some of its beats.
    def stop():
        return drop is not None and "out" in result

    async def mask_source(ctx):
        await send(ctx, dut.s_axis_mask, [{"data": m, "last": last} for m, last in masks], rng,
                   idle, stop=stop)

    async def data_source(ctx):
        await send(ctx, dut.s_axis_data, [{"data": ints(unpack_beat(t, lanes, width)),
                                           "last": last} for t, last in data], rng, idle,
                   stop=stop)

    async def sink(ctx):
        out = await receive(ctx, dut.m_axis, len(expected), rng, bp, name="m_axis",
                            drain=12 if drop is None else 0)
        await ctx.tick().repeat(3)   # the last row's error pulse
        result["out"] = out

    run(dut, [mask_source, data_source, sink], [count_pulses(dut.error, result, "errors")],
        cycles=40 * (len(expected) + len(data) + 50))
    assert [(pack_beat(ints(b.data), width), int(b.last)) for b in result["out"]] == expected
    assert result["errors"] == errors
    event(f"error rows: {min(errors, 2)}")


# --- GEMM ---------------------------------------------------------------------------------

def packet(raw, lanes):
    """A matrix as one packet of ``{"data": lanes, "last"}`` beats, row-major."""
    flat = raw.reshape(-1)
    count = len(flat) // lanes
    return [{"data": ints(flat[i * lanes:(i + 1) * lanes]), "last": int(i == count - 1)}
            for i in range(count)]


def c_expected(tiles, b_raw, p):
    """``m_axis_c`` beats ``(lanes, last)`` for ``A`` tiles times ``b_raw`` (golden/gemm.py)."""
    want = []
    for t in tiles:
        c = gemm(t, b_raw, width=p["width"], signed=p["signed"], acc_width=p["acc_width"])
        want += [(b["data"], b["last"]) for b in packet(c, p["lanes"])]
    return want


@settings(max_examples=examples("gemm"))
@given(p=VALID_PARAMS["gemm"], seed=seeds, idle=rates, bp=rates,
       loads=st.lists(st.tuples(densities, st.lists(st.tuples(st.integers(1, 4), densities),
                                                    min_size=1, max_size=3)),
                      min_size=1, max_size=2))
def test_gemm(p, loads, seed, idle, bp):
    """Per load, a ``B`` then its ``A`` tiles (a second ``B`` is offered while the first one's
    tiles are in flight: it must wait for them; with two weight sets, a ``B`` for each tile).
    Every C element equals golden/gemm.py's ``A·B mod 2**acc_width`` with the ``B`` of its
    load; the conflict strobes add up to ``row_passes``' conflict passes; ``err_a_stream``
    stays low on well-formed A."""
    blocks.get("gemm").resolve(p)
    rng, np_rng = rngs(seed)
    lanes, width = p["lanes"], p["width"]
    plan, want, masks, data = [], [], [], []
    # Two weight sets pair each tile with a B of its own: every tile is a load.
    sets = p.get("weight_sets", 1) == 2
    for b_density, tiles in [(d, [t]) for d, ts in loads for t in ts] if sets else loads:
        b_raw = random_elements(np_rng, (p["k"], p["n"]), width, b_density)
        a_tiles = [random_elements(np_rng, (rows, p["k"]), width, d) for rows, d in tiles]
        encoded = [encode_tile(t, lanes=lanes, width=width, number_format="int",
                               bypass=not p["sparse"]) for t in a_tiles]
        want += c_expected(a_tiles, b_raw, p)
        plan.append((packet(b_raw, lanes),
                     [{"data": m, "last": last} for e in encoded for m, last in e.masks]))
        masks += [m for e in encoded for m, _ in e.masks]
        data += [{"data": ints(unpack_beat(d, lanes, width)), "last": last}
                 for e in encoded for d, last in e.data]
    dut = SparseGemm(**p)
    result = {"conflicts": 0, "errors": 0}

    async def b_and_masks(ctx):
        for b_beats, mask_beats in plan:
            await send(ctx, dut.s_axis_b, b_beats, rng, idle)
            await send(ctx, dut.s_axis_a_mask, mask_beats, rng, idle)

    async def data_source(ctx):
        await send(ctx, dut.s_axis_a_data, data, rng, idle)

    async def c_sink(ctx):
        result["c"] = await receive(ctx, dut.m_axis_c, len(want), rng, bp, name="m_axis_c")

    run(dut, [b_and_masks, data_source, c_sink],
        [count_pulses(dut.stat_conflict, result, "conflicts"),
         count_pulses(dut.err_a_stream, result, "errors")],
        cycles=60 * (len(want) + sum(len(b) for b, _ in plan) + len(masks) + len(data)) + 500)
    assert [(ints(b.data), int(b.last)) for b in result["c"]] == want
    timing = GemmTiming.of(p)
    assert result["conflicts"] == sum(row_passes(m, timing)[1] for m in masks)
    assert result["errors"] == 0
    event(f"B loads: {len(loads)}")


# --- core ---------------------------------------------------------------------------------

@settings(max_examples=examples("core"))
@given(p=VALID_PARAMS["core"], seed=seeds, b_density=densities, idle=rates, bp=rates,
       passes=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 255), st.integers(0, 20),
                                 st.lists(st.tuples(st.integers(1, 3), densities), min_size=1,
                                          max_size=3)),
                       min_size=1, max_size=2))
def test_core(p, passes, b_density, seed, idle, bp):
    """The whole core through its ports: per pass, MODE (0-3), THRESHOLD and TABLE_BASE written
    over AXI4-Lite with PASS_START, then the pass's A tiles; every C element equals
    golden/core.py's, and after the last pass every event counter read over AXI4-Lite equals
    the model's (which includes the per-tile dense/sparse decisions of the density table)."""
    blocks.get("core").resolve(p)
    rng, np_rng = rngs(seed)
    lanes, width, k = p["lanes"], p["width"], p["k"]
    model = CoreModel(dict(p))
    b_raw = random_elements(np_rng, (k, p["n"]), width, b_density)
    model.load_b(b_raw)
    plan, want = [], []   # per pass: (mode, threshold, table_base, A beats, C beats so far)
    for mode, threshold, table_base, tiles in passes:
        model.mode, model.threshold, model.table_base = mode, threshold, table_base
        model.pass_start()
        a_beats = []
        for rows, density in tiles:
            a_raw = random_elements(np_rng, (rows, k), width, density)
            c, sparse = model.run_tile(a_raw)
            note(f"mode {mode}: tile of {rows} rows, density {density:.2f}: sparse {sparse}")
            want += c_expected([a_raw], b_raw, p)
            a_beats += packet(a_raw, lanes)
        plan.append((mode, threshold, table_base, a_beats, len(want)))
    dut = SpartanCore(**p)
    offsets = {r.name: r.offset for r in dut.regmap.registers}
    result = {"c": [], "counters": {}}
    b_beats = packet(b_raw, lanes)

    async def control(ctx):
        await send(ctx, dut.s_axis_b, b_beats, rng, idle)
        for mode, threshold, table_base, a_beats, c_total in plan:
            await axil_write(ctx, dut, offsets["THRESHOLD"], threshold)
            await axil_write(ctx, dut, offsets["TABLE_BASE"], table_base)
            await axil_write(ctx, dut, offsets["CTRL"], mode | 1 << 2)   # MODE, PASS_START
            await send(ctx, dut.s_axis_a, a_beats, rng, idle)
            while len(result["c"]) < c_total:
                await ctx.tick()
        for name in EVENT_COUNTERS:
            result["counters"][name] = await axil_read(ctx, dut, offsets[name])

    async def c_sink(ctx):
        # ``control`` waits for each pass's C: appended pass by pass.
        got = result["c"]
        for n, (*_, c_total) in enumerate(plan):
            got += await receive(ctx, dut.m_axis_c, c_total - len(got), rng, bp,
                                 name="m_axis_c", drain=12 if n == len(plan) - 1 else 0)

    beats = sum(len(pl[3]) for pl in plan) + len(b_beats)
    run(dut, [control, c_sink], cycles=80 * (len(want) + beats) + 2000)
    assert [(ints(b.data), int(b.last)) for b in result["c"]] == want
    assert result["counters"] == model.counters
    event(f"modes: {sorted({m for m, *_ in passes})}")
    event(f"sparse tiles: {model.counters['TILES_SPARSE'] > 0}")


# --- Verilog of any accepted set -------------------------------------------------------------

#: Lint findings tolerated at corner sizes (not at the defaults, which ``make lint`` checks),
#: both style rather than function, both found by this test: input bits no logic reads (the
#: core's ``s_axil_wdata[31:16]`` and ``s_axil_wstrb[3:2]`` at ``k <= 4``; the dense-only GEMM's
#: ``g_idx`` top bit at k=14, k_par=8), and a comparison Yosys left constant (the dense-only
#: GEMM with ``b_banks = k_par``: ``1'h0 > c_sub``).
CORNER_LINT = ("%Warning-UNUSEDSIGNAL", "%Warning-UNSIGNED")


@settings(max_examples=examples("verilog"))
@given(name=st.sampled_from(BLOCK_NAMES), data=st.data())
def test_generated_verilog(name, data, tmp_path_factory):
    """Any accepted parameter set (in the drawn sizes) goes through ``spartan generate``'s
    path: one flat module whose ports are the manifest's, with the manifest's widths, and
    ``verilator --lint-only -Wall`` finds nothing but :data:`CORNER_LINT`."""
    from spartan_rtl.hw.emit import generate
    from verif.flows.lint import lint

    p = data.draw(VALID_PARAMS[name])
    block = blocks.get(name)
    out = tmp_path_factory.mktemp("rtl")
    verilog_path = generate(block, p, out)[0]
    verilog = verilog_path.read_text()
    doc = json.loads((out / f"{block.top}.json").read_text())
    assert doc["params"] == block.resolve(p)
    header = re.search(rf"module {block.top}\((.*?)\);", verilog, re.S).group(1)
    assert sorted(x.strip() for x in header.split(",")) == sorted(q["name"] for q in doc["ports"])
    for port in doc["ports"]:
        decl = re.search(rf"^\s*(input|output)\s*(\[(\d+):0\])?\s*{port['name']};", verilog,
                         re.M)
        assert decl and (int(decl.group(3)) + 1 if decl.group(3) else 1) == port["width"], \
            port["name"]
    code, output = lint(verilog_path)
    findings = [line for line in output.splitlines() if line.startswith("%Warning")]
    assert all(f.startswith(CORNER_LINT) for f in findings), output
    assert code == 0 or findings, output
    event(f"corner lint findings: {bool(findings)}")


# --- invalid parameter sets ---------------------------------------------------------------

_name_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_0123456789", min_size=1, max_size=12)


def in_range_value(param):
    """Any value of ``param``'s type inside its declared range (small ones often)."""
    if param.kind is bool:
        return st.booleans()
    if param.kind is str:
        return st.sampled_from(re.findall(r"'([^']*)'", param.what))
    lo, hi, pow2 = declared_range(param)
    if pow2:
        return powers_of_two(lo, hi)
    return st.one_of(st.sampled_from([lo, hi]), st.integers(lo, min(hi, lo + 64)),
                     st.integers(lo, hi))


@st.composite
def invalid_sets(draw, block):
    """``values`` that ``block`` must reject: an unknown name, one value of the wrong type or out
    of its range among otherwise valid ones, or in-range values breaking a rule between
    parameters."""
    params = list(block.params)
    names = [p.name for p in params]
    kind = draw(st.sampled_from(["unknown", "value", "value", "cross", "cross"]))
    event(f"invalid: {kind}")
    values = {p.name: draw(in_range_value(p)) for p in params
              if draw(st.booleans()) or kind == "cross"}
    if kind == "unknown":
        values[draw(_name_text.filter(lambda n: n not in names))] = draw(st.integers())
    elif kind == "value":
        victim = draw(st.sampled_from(params))
        values[victim.name] = draw(invalid_value(victim))
    assume(expected_error(block, values) is not None)
    return values


@settings(max_examples=examples("invalid"))
@given(data=st.data(), name=st.sampled_from(BLOCK_NAMES))
def test_invalid_parameters_rejected(name, data):
    """``Block.resolve`` and the component's constructor raise exactly the documented error
    (type, and the whole message) and nothing else."""
    block = blocks.get(name)
    values = data.draw(invalid_sets(block))
    error, pattern = expected_error(block, values)
    with pytest.raises((TypeError, ValueError)) as info:
        block.resolve(values)
    assert info.type is error and re.fullmatch(pattern, str(info.value)), \
        f"{info.type.__name__}: {info.value}"
    names = {p.name for p in block.params}
    if set(values) <= names:   # (unknown keywords are Python's TypeError in a constructor)
        with pytest.raises((TypeError, ValueError)) as info:
            block.build(**values)
        assert info.type is error and re.fullmatch(pattern, str(info.value)), \
            f"{info.type.__name__}: {info.value}"


def test_a_none_given_is_refused_by_the_constructor_too():
    """Found by the test above: the GEMM's constructor took ``n_par=None`` as "not given" (n_par
    then follows n) where ``Block.resolve`` refuses it."""
    block = blocks.get("gemm")
    for values in ({"n_par": None}, {"b_banks": 2, "n_par": None}):
        for make in (block.resolve, lambda v: block.build(**v)):
            with pytest.raises(TypeError, match=r"n_par must be a power of two from 1 to 256, "
                                                r"not None"):
                make(values)


def test_declared_ranges_agree_with_checks():
    """The range each parameter documents is the range it accepts, at and around its ends."""
    for block in blocks.BLOCKS.values():
        for p in block.params:
            if p.kind is not int:
                continue
            lo, hi, pow2 = declared_range(p)
            for v in (lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 3, 6, 96):
                ok = in_declared_range(p, v)
                try:
                    p.check(v)
                    accepted = True
                except ValueError:
                    accepted = False
                assert accepted == ok, (block.name, p.name, v)


# --- the same through ``spartan generate`` ------------------------------------------------

def text_of(value):
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


@st.composite
def cli_sets(draw, block):
    """``--set`` items (name, text) that ``block`` must reject, and the values they parse to
    (None where the text is no value of the parameter's type)."""
    params = list(block.params)
    names = [p.name for p in params]
    kind = draw(st.sampled_from(["unknown", "text", "range", "cross"]))
    event(f"cli: {kind}")
    items = {p.name: text_of(draw(in_range_value(p))) for p in params
             if kind == "cross" or draw(st.booleans())}
    if kind == "unknown":
        items[draw(_name_text.filter(lambda n: n not in names))] = "1"
    elif kind == "text":
        p = draw(st.sampled_from(params))
        items[p.name] = draw(st.one_of(st.text(max_size=6), st.sampled_from(
            ["1.5", "8.0", "none", "[1]", "0x", "maybe", "", "1e3", "--"])))
    elif kind == "range":
        p = draw(st.sampled_from([q for q in params if q.kind is int]))
        items[p.name] = draw(st.one_of(st.integers().map(str), st.integers(0, 300).map(hex)))
    return items


def parse_text(param, text):
    """What a ``--set`` text means (docs/interfaces.md#the-command-line): integers as Python
    reads them (base prefixes allowed), flags true/false/1/0/yes/no/on/off, choices as typed;
    ``text`` itself otherwise (then the error quotes the text)."""
    text = text.strip()
    if param.kind is int:
        try:
            return int(text, 0)
        except ValueError:
            return text
    if param.kind is bool:
        return {"1": True, "true": True, "yes": True, "on": True,
                "0": False, "false": False, "no": False, "off": False}.get(text.lower(), text)
    return text


def cli_expected(block, items):
    """``(type, pattern)`` of the error for ``--set`` items, or None: each item in command-line
    order is a known name with a value of its type in its range, then the rules between
    parameters."""
    names = [p.name for p in block.params]
    values = {}
    for n, text in items.items():
        if n not in names:
            return expected_error(block, {n: text})
        param = block.param(n)
        values[n] = value = parse_text(param, text)
        if not in_declared_range(param, value):
            return ValueError, re.escape(f"{n} must be {param.what}, not {value!r}")
    return expected_error(block, values)


@settings(max_examples=examples("cli"))
@given(data=st.data(), name=st.sampled_from(BLOCK_NAMES))
def test_cli_rejects_invalid(name, data, tmp_path_factory):
    """``spartan generate BLOCK --set ...`` with a bad set: exit status 2, exactly one line
    ``spartan: error: <the documented message>`` on stderr, nothing written."""
    block = blocks.get(name)
    items = data.draw(cli_sets(block))
    expected = cli_expected(block, items)
    assume(expected is not None)
    out_dir = tmp_path_factory.mktemp("cli")
    argv = ["generate", name, "-o", str(out_dir)]
    for n, text in items.items():
        argv += ["--set", f"{n}={text}"]
    stderr, stdout = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stdout):
        status = cli.main(argv)
    lines = stderr.getvalue().splitlines()
    assert status == 2 and len(lines) == 1, (status, stderr.getvalue())
    assert re.fullmatch("spartan: error: " + expected[1], lines[0]), lines[0]
    assert not any(out_dir.iterdir()) and not stdout.getvalue()


TOML_VALUES = st.one_of(st.integers(-2 ** 63, 2 ** 63 - 1), st.booleans(),
                        st.floats(allow_nan=False, allow_infinity=False),
                        st.text(alphabet="abcdefghijklmnopqrstuvwxyz 0123456789'.-", max_size=6),
                        st.lists(st.integers(0, 9), max_size=2))


def toml_value(value):
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (str, list)):
        return json.dumps(value)
    return str(value)


@settings(max_examples=examples("cli"))
@given(data=st.data(), name=st.sampled_from(BLOCK_NAMES), table=st.booleans())
def test_cli_config_rejects_invalid(name, table, data, tmp_path_factory):
    """``--config FILE.toml`` holding any TOML values (ints, floats, strings, flags, arrays)
    for known and unknown names, top level or in a ``[params]`` table: exactly the error that
    ``Block.resolve`` documents, on one line, exit status 2, nothing written."""
    block = blocks.get(name)
    names = [p.name for p in block.params]
    keys = data.draw(st.lists(st.one_of(st.sampled_from(names + ["params"]), _name_text),
                              min_size=1,
                              max_size=4, unique=True))
    values = {key: data.draw(TOML_VALUES) for key in keys}
    expected = expected_error(block, values)
    assume(expected is not None)
    folder = tmp_path_factory.mktemp("config")
    lines = ["[params]"] if table else []
    lines += [f"{key} = {toml_value(v)}" for key, v in values.items()]
    (folder / "cfg.toml").write_text("\n".join(lines) + "\n")
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["generate", name, "--config", str(folder / "cfg.toml"),
                           "-o", str(folder / "out")])
    out = stderr.getvalue().splitlines()
    assert status == 2 and len(out) == 1, (status, stderr.getvalue())
    assert re.fullmatch("spartan: error: " + expected[1], out[0]), out[0]
    assert not (folder / "out").exists()


@pytest.mark.parametrize("text, message", [
    # Found by test_cli_config_rejects_invalid: ``params = 3`` crashed with "'int' object is not
    # iterable", ``params = ""`` (or ``[]``) generated the defaults, and top-level values beside
    # a [params] table were dropped without a word.
    ("params = 3\n", "parameter must be one of lanes, width, number_format, max_tile_elems, "
                     "not 'params'"),
    ('params = ""\n', "parameter must be one of lanes, width, number_format, max_tile_elems, "
                      "not 'params'"),
    ("params = []\n", "parameter must be one of lanes, width, number_format, max_tile_elems, "
                      "not 'params'"),
    ("lanes = 3\n[params]\nwidth = 8\n", "lanes must be a power of two from 1 to 64, not 3"),
])
def test_config_params_regression(tmp_path, text, message):
    (tmp_path / "cfg.toml").write_text(text)
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(io.StringIO()):
        status = cli.main(["generate", "monitor", "--config", str(tmp_path / "cfg.toml"),
                           "-o", str(tmp_path / "out")])
    assert status == 2 and stderr.getvalue() == f"spartan: error: {message}\n"
    assert not (tmp_path / "out").exists()
