"""Property-based fuzzing (hypothesis): the profiles, the parameter-set and stimulus strategies,
and the amaranth.sim drivers shared by verif/tests/test_fuzz.py.

Profiles (``HYPOTHESIS_PROFILE``; docs/verification.md, "Property-based fuzzing")
    ``fast`` (the default, part of ``make test``): a fixed small number of examples per
    property, derandomized (the same examples on every run and machine), no database.
    ``long`` (``make fuzz``): :data:`LONG_FACTOR` times the examples, random, failures kept in
    ``.hypothesis/`` and replayed first on the next run.

Valid parameter sets are drawn inside each block's declared ranges (hw/<block>.py ``PARAMS``)
and cross-parameter rules, at sizes amaranth.sim elaborates in about a second; invalid ones
anywhere, see :func:`invalid_value` and :func:`expected_error`.
"""

from __future__ import annotations

import os
import random
import re

import numpy as np
from amaranth.hdl import Shape
from amaranth.sim import Simulator
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from verif.flows import ROOT

__all__ = ["PROFILE", "examples", "powers_of_two", "densities", "rates", "seeds",
           "VALID_PARAMS", "declared_range", "in_declared_range", "cross_rule_error",
           "invalid_value", "expected_error", "send", "receive", "count_pulses", "run", "rngs"]


#: Examples per property in the fast profile; ``long`` multiplies them by LONG_FACTOR.
#: Examples of the properties that are not one block's (a block's come from its profile).
FAST_EXAMPLES = {"verilog": 6, "invalid": 300, "cli": 60}
LONG_FACTOR = 20

# (No "explain" phase: it re-runs a failing simulation dozens of times.)
_common = dict(deadline=None, print_blob=True,
               phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("fast", derandomize=True, database=None, **_common)
settings.register_profile("long", derandomize=False,
                          database=DirectoryBasedExampleDatabase(str(ROOT / ".hypothesis" /
                                                                     "examples")),
                          **_common)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fast")
settings.load_profile(PROFILE)


def examples(name):
    """``max_examples`` for one property (a block's name: its profile's budget) under the
    active hypothesis profile."""
    from spartan_rtl.hw.blocks import BLOCKS
    from spartan_rtl.tb import profile
    fast = profile.of(name).fuzz_examples if name in BLOCKS else FAST_EXAMPLES[name]
    return fast * (LONG_FACTOR if PROFILE == "long" else 1)


# --- building blocks of strategies --------------------------------------------------------------

def powers_of_two(lo, hi):
    return st.sampled_from([1 << i for i in range(lo.bit_length() - 1, hi.bit_length())])


#: Tile densities: the all-zero and all-dense corners often, anything in between.
densities = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))
#: Idle and back-pressure probabilities, from "never" to "most cycles".
rates = st.sampled_from([0.0, 0.1, 0.3, 0.6, 0.85])
#: Seeds of the element values (the shapes, densities and rates are drawn directly).
seeds = st.integers(0, 2 ** 32 - 1)


# --- valid parameter sets (small enough for amaranth.sim) ---------------------------------------

@st.composite
def _element_format(draw, max_width=64):
    fmt = draw(st.sampled_from(["int", "fp"]))
    width = draw(st.one_of(st.integers(2 if fmt == "fp" else 1, max_width),
                           st.sampled_from([2 if fmt == "fp" else 1, max_width])))
    return fmt, width


@st.composite
def monitor_params(draw):
    fmt, width = draw(_element_format())
    return dict(lanes=draw(powers_of_two(1, 16)), width=width, number_format=fmt,
                max_tile_elems=draw(st.one_of(st.integers(1, 16), st.sampled_from([1, 3, 8]),
                                              st.sampled_from([65536, 2 ** 32]),
                                              st.integers(1, 2 ** 32))))


@st.composite
def zvc_params(draw):
    """The compactor's and the expander's (the same PARAMS and check)."""
    fmt, width = draw(_element_format())
    lanes = draw(powers_of_two(1, 8))
    return dict(lanes=lanes, width=width, number_format=fmt,
                cols=lanes * draw(st.integers(1, 6)))


@st.composite
def gemm_params(draw, core=False):
    lanes = draw(powers_of_two(1, 4))
    k = lanes * draw(st.integers(1, max(1, 16 // lanes)))
    k_par = draw(powers_of_two(1, min(8, 1 << (k.bit_length() - 1))))
    n_par = lanes * draw(powers_of_two(1, max(1, 8 // lanes)))
    p = dict(lanes=lanes, width=draw(st.integers(1, 32)), signed=draw(st.booleans()),
             acc_width=draw(st.one_of(st.integers(1, 64), st.sampled_from([1, 64]))),
             k=k, n=n_par * draw(st.integers(1, 3)), k_par=k_par, n_par=n_par,
             b_banks=draw(powers_of_two(1, k_par)))
    if core:
        p.update(table_depth=draw(powers_of_two(1, 16)),
                 max_tile_elems=draw(st.one_of(st.integers(1, 64), st.integers(1, 2 ** 24))))
    else:
        p["sparse"] = draw(st.booleans())
        if k_par == 1:
            p["weight_sets"] = draw(st.sampled_from([1, 2]))
    return p


@st.composite
def engine_params(draw):
    """The layer engine's: a bus word is one beat of whole-byte elements (docs/engine.md)."""
    width = draw(st.sampled_from([8, 16]))
    lanes = draw(powers_of_two(32 // width, 8))
    k = lanes * draw(st.integers(1, 3))
    n_par = lanes * draw(powers_of_two(1, 2))
    k_par = draw(powers_of_two(1, min(4, 1 << (k.bit_length() - 1))))
    return dict(lanes=lanes, width=width, signed=draw(st.booleans()),
                acc_width=draw(st.sampled_from([16, 32, 64])), k=k,
                n=n_par * draw(st.integers(1, 2)), k_par=k_par, n_par=n_par,
                b_banks=draw(powers_of_two(1, k_par)), table_depth=draw(powers_of_two(1, 16)),
                max_tile_elems=draw(st.one_of(st.integers(1, 64), st.integers(1, 2 ** 24))),
                data_width=lanes * width, acc_rows=draw(powers_of_two(8, 32)),
                max_burst=draw(powers_of_two(1, 16)))


VALID_PARAMS = {"monitor": monitor_params(), "compactor": zvc_params(),
                "expander": zvc_params(), "gemm": gemm_params(), "core": gemm_params(core=True),
                "engine": engine_params()}


# --- invalid parameter sets ---------------------------------------------------------------------

_RANGE = re.compile(r"^(an integer|a power of two) from (\d+) to (\d+)")


def declared_range(param):
    """``(lo, hi, power_of_two)`` read from an integer parameter's documented range (the text
    the user sees in errors and ``spartan list``)."""
    m = _RANGE.match(param.what)
    assert m, f"{param.name}: undocumented range {param.what!r}"
    return int(m.group(2)), int(m.group(3)), m.group(1) == "a power of two"


def in_declared_range(param, value):
    if param.kind is bool:
        return isinstance(value, bool)
    if param.kind is str:
        return isinstance(value, str) and value in re.findall(r"'([^']*)'", param.what)
    if not isinstance(value, int) or isinstance(value, bool):
        return False
    lo, hi, pow2 = declared_range(param)
    return lo <= value <= hi and (not pow2 or value & (value - 1) == 0)


#: The whole message of a parameter that needs the broadcast datapath: its ``name=value``
#: and the ``k_par`` given (regular expressions).
NEEDS_K_PAR_1 = r"{} needs k_par 1 \(the broadcast datapath\), not {}"


def cross_rule_error(block, p):
    """The rule between parameters that ``p`` (each value in range) breaks, as ``(name,
    value)`` (or, for a rule not worded "must be", the whole message's pattern), or None.
    Written from docs/interfaces.md and the documented parameter meanings, not from the checks
    in hw/: every "multiple of", "dividing", "at most", "needs" of ``spartan list``."""
    if p.get("number_format") == "fp" and p["width"] < 2:
        return "width", p["width"]                     # a sign bit and a magnitude
    if block in ("compactor", "expander") and p["cols"] % p["lanes"]:
        return "cols", p["cols"]
    if block in ("gemm", "core", "engine"):
        for name in ("k", "n"):
            if p[name] % p["lanes"]:
                return name, p[name]
        if p["k_par"] > p["k"]:
            return "k_par", p["k_par"]
        if p["n_par"] % p["lanes"] or p["n"] % p["n_par"]:
            return "n_par", p["n_par"]
        # ``multiplier=ecp5`` and two weight sets are the broadcast datapath's (k_par 1), and
        # the MULT18X18D takes operands of up to 18 bits (docs/interfaces.md, gemm).
        for name, value in (("multiplier", "ecp5"), ("weight_sets", 2)):
            if p.get(name) == value and p["k_par"] != 1:
                return NEEDS_K_PAR_1.format(re.escape(f"{name}={value}"),
                                            re.escape(repr(p["k_par"])))
            if name == "multiplier" and p[name] == value and p["width"] > 18:
                return "width", p["width"]
        if p["b_banks"] > p["k_par"]:
            return "b_banks", p["b_banks"]
        if block in ("core", "engine") and p["k"] > 4096:   # the compactor's row length
            return "k", p["k"]
    if block == "engine":                              # whole bytes; a bus word is one beat
        if p["width"] not in (8, 16):
            return "width", p["width"]
        if p["acc_width"] not in (16, 32, 64):
            return "acc_width", p["acc_width"]
        if p["data_width"] != p["lanes"] * p["width"]:
            return "data_width", p["data_width"]
    return None


def _wrong_type_values(param):
    others = [st.none(), st.floats(allow_nan=False), st.lists(st.integers(), max_size=2),
              st.binary(max_size=3)]
    if param.kind is int:
        others += [st.booleans(), st.text(max_size=4), st.just(8.0)]
    elif param.kind is bool:
        others += [st.integers(), st.sampled_from(["true", "false", "1"])]
    else:
        others += [st.integers(), st.booleans()]
    return st.one_of(others)


@st.composite
def invalid_value(draw, param):
    """A value of ``param`` outside its declared type or range."""
    kinds = ["type"]
    if param.kind is int:
        kinds.append("range")
    if param.kind is str:
        kinds.append("choice")
    kind = draw(st.sampled_from(kinds))
    if kind == "type":
        return draw(_wrong_type_values(param))
    if kind == "choice":
        return draw(st.text(max_size=6).filter(lambda s: not in_declared_range(param, s)))
    lo, hi, pow2 = declared_range(param)
    candidates = [st.integers(max_value=lo - 1), st.integers(min_value=hi + 1),
                  st.sampled_from([lo - 1, hi + 1, -1, 2 ** 64])]
    if pow2 and hi - lo > 2:
        candidates.append(st.integers(lo + 1, hi - 1).filter(lambda v: v & (v - 1)))
    return draw(st.one_of(candidates).filter(lambda v: not in_declared_range(param, v)))


def documented_derived_default(name, earlier):
    """``(value, rule)`` of a parameter whose default follows others (docs/interfaces.md,
    "Blocks"), computed from ``earlier`` (the checked values declared before it), or None."""
    if name == "n_par" and "n" in earlier:
        return (max(d for d in (1, 2, 4, 8, 16, 32, 64) if earlier["n"] % d == 0),
                "the largest power of two up to 64 that divides n")
    if name == "data_width" and {"lanes", "width"} <= set(earlier):
        return earlier["lanes"] * earlier["width"], "lanes*width"
    return None


def expected_error(block, values):
    """``(exception type, regular expression of the whole message)`` that resolving ``values``
    must raise, or None when they are valid: unknown names first, then each parameter in
    declaration order (type, then range; one left out whose default follows others has that
    value), then the rules between parameters (whose "must be" wording is the block's: the
    expression pins the name and the value), then the elaboration-size bound."""
    names = [p.name for p in block.params]
    for name in values:
        if name not in names:
            # A close misspelling may add the nearest known name as a suggestion.
            near = "|".join(re.escape(repr(n)) for n in names)
            return ValueError, (re.escape(f"parameter must be one of {', '.join(names)}, "
                                          f"not {name!r}") + rf"( \(did you mean ({near})\?\))?")
    full = {}
    for p in block.params:
        follows = None if p.name in values else documented_derived_default(p.name, full)
        value = values.get(p.name, p.default) if follows is None else follows[0]
        wrong_type = not isinstance(value, p.kind) or (p.kind is int and isinstance(value, bool))
        if wrong_type or not in_declared_range(p, value):
            how = "" if follows is None else f" (its default when not set: {follows[1]})"
            return (TypeError if wrong_type else ValueError), \
                re.escape(f"{p.name} must be {p.what}, not {value!r}{how}")
        full[p.name] = value
    broken = cross_rule_error(block.name, full)
    if isinstance(broken, str):
        return ValueError, broken
    if broken:
        name, value = broken
        return ValueError, rf"{name} must be [^\n]+, not {re.escape(repr(value))}"
    return size_bound_error(block.name, full)


#: docs/interfaces.md, "Elaboration size": the largest estimate ``spartan generate`` accepts.
SIZE_LIMIT = 200_000


def documented_size(block, p):
    """The elaboration-size estimate docs/interfaces.md gives for the parameters ``p`` of
    ``block``, or None for a block without the bound."""
    if block not in ("gemm", "core", "engine"):
        return None
    k, n, lanes, width = p["k"], p["n"], p["lanes"], p["width"]
    k_par, n_par, b_banks = p["k_par"], p["n_par"], p["b_banks"]
    size = 32 * k + 8 * k_par * n_par + k * n * width * (k_par // b_banks) // 64
    if k_par > 1:
        size += (16 if b_banks > 1 else 4) * k_par * k_par
        if p.get("sparse", True):
            size += k * k // 2 + 8 * k * lanes
    if block == "gemm" and p["weight_sets"] == 2:      # the second set (the GEMM's own term)
        size += k * n * width // 64
    if block == "engine":
        rows = p["acc_rows"]
        size += (rows * n * p["acc_width"] + max(k, n) * max(rows, k) * width) // 32
    return size


def size_bound_error(block, p):
    """The whole message's pattern when ``p`` (every rule kept) is over the size bound: a
    parameter of the estimate, the estimate and the bound, or None."""
    size = documented_size(block, p)
    if size is None or size <= SIZE_LIMIT:
        return None
    names = ("k", "n", "k_par") + (("acc_rows",) if block == "engine" else ())
    return ValueError, "|".join(
        rf"(?:{name} must be [^\n]+ \(elaboration size {size}, over the bound {SIZE_LIMIT} "
        rf"[^\n]*\), not {re.escape(repr(p[name]))})" for name in names)


# --- amaranth.sim drivers -----------------------------------------------------------------------

async def send(ctx, stream, payloads, rng, idle, *, before=None, stop=None):
    """Send every payload on ``stream`` (a sink of the DUT) as an AXI4-Stream master: random
    idle cycles between beats with random garbage on the payload while ``valid`` is low,
    ``valid`` held until ``ready``. ``before(ctx, i)`` runs as beat ``i`` is first offered;
    a beat still waiting when ``stop()`` is true is abandoned (the test is over)."""
    bits = Shape.cast(stream.payload.shape()).width
    for i, payload in enumerate(payloads):
        while rng.random() < idle:
            ctx.set(stream.valid, 0)
            ctx.set(stream.payload.as_value(), rng.getrandbits(bits))
            await ctx.tick()
        if before:
            before(ctx, i)
        ctx.set(stream.payload, payload)
        ctx.set(stream.valid, 1)
        while not (await ctx.tick().sample(stream.ready))[2]:
            if stop and stop():
                return
    ctx.set(stream.valid, 0)
    ctx.set(stream.payload.as_value(), rng.getrandbits(bits))


async def receive(ctx, stream, count, rng, backpressure, *, name, drain=12):
    """Receive ``count`` beats from ``stream`` (a source of the DUT) with random back-pressure,
    checking AXI4-Stream stability (a beat offered and not taken stays offered, unchanged);
    then ``drain`` cycles ready with nothing more offered (no invented beat). Returns the
    payloads as sampled (``data.Const`` views)."""
    received, held = [], None
    while len(received) < count:
        ready = rng.random() >= backpressure
        ctx.set(stream.ready, ready)
        _, _, valid, raw, payload = await ctx.tick().sample(stream.valid, stream.payload.as_value(),
                                                            stream.payload)
        if held is not None:
            assert valid and raw == held, \
                f"{name}: beat {len(received)} withdrawn or changed before it was taken"
        if valid and ready:
            received.append(payload)
        held = raw if valid and not ready else None
    ctx.set(stream.ready, 1)
    for cycle in range(drain):
        _, _, valid = await ctx.tick().sample(stream.valid)
        assert not valid, f"{name}: a beat beyond the {count} expected, {cycle} cycles later"
    return received


def count_pulses(signal, into, key):
    """A background testbench adding ``signal`` up over every cycle into ``into[key]``."""
    async def tb(ctx):
        async for _, _, value in ctx.tick().sample(signal):
            into[key] += value
    return tb


def run(dut, testbenches, background=(), *, cycles):
    """Run the testbenches to completion; fail (rather than hang) after ``cycles`` cycles."""
    sim = Simulator(dut)
    sim.add_clock(1e-8)
    for tb in testbenches:
        sim.add_testbench(tb)
    for tb in background:
        sim.add_testbench(tb, background=True)
    steps = 0
    while sim.advance():
        steps += 1
        assert steps < 4 * cycles, f"simulation still running after {cycles} cycles"


def rngs(seed):
    """A Python and a NumPy generator from one drawn seed."""
    return random.Random(seed), np.random.default_rng(seed)
