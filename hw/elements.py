"""Element formats shared by every block (which bit patterns count as zero, beat layouts) and the
small hardware helpers several blocks build from (adder and multiplexer trees)."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data, fifo

__all__ = ["is_nonzero", "lanes_layout", "beat_layout", "tree_sum", "staged_tree_sum",
           "delayed", "lookup", "mux_tree", "log2", "NO_RW_CHECK", "BlockRamFifo"]


def is_nonzero(element: Value, width: int, number_format: str) -> Value:
    """1 when ``element`` is not a zero of ``number_format``.

    ``int``: any bit set. ``fp``: sign-magnitude float, so +0 and -0 (only the sign bit set)
    are both zero; the magnitude bits below the sign decide.
    """
    element = Value.cast(element)
    if number_format == "fp":
        return element[:width - 1].any()
    return element.any()


def lanes_layout(lanes, width):
    """``lanes`` elements of ``width`` bits; lane ``i`` at bits ``[i*width +: width]``."""
    return data.ArrayLayout(width, lanes)


def beat_layout(lanes, width, *, user_width=0):
    """Payload of a dense element stream: ``data`` lanes, ``last`` and an optional ``user``."""
    fields = {"data": lanes_layout(lanes, width), "last": 1}
    if user_width:
        fields["user"] = user_width
    return data.StructLayout(fields)


def tree_sum(values):
    """Sum as a balanced adder tree (log depth; a chain would be ``len(values)`` adders deep).
    Used for popcounts of per-lane flags and for reductions across lanes."""
    values = list(values)
    while len(values) > 1:
        paired = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
    return values[0]


def staged_tree_sum(m, values, *, levels_per_stage, name):
    """:func:`tree_sum` with a register after every ``levels_per_stage`` adder levels and after
    the last one, so no clock period spans more than ``levels_per_stage`` adders.

    Returns ``(total, stages)``: the registered sum, valid ``stages`` cycles after ``values``
    (``ceil(levels / levels_per_stage)``, 0 for a single value, which is returned as is).
    The registers load every cycle: a pipeline that never stalls."""
    values = [Value.cast(v) for v in values]
    stages = level = 0
    while len(values) > 1:
        paired = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
        if len(values) % 2:
            paired.append(values[-1])
        values = paired
        level += 1
        if level % levels_per_stage == 0 or len(values) == 1:
            stages += 1
            registered = [Signal(v.shape(), name=f"{name}_s{stages}_{i}")
                          for i, v in enumerate(values)]
            m.d.sync += [r.eq(v) for r, v in zip(registered, values)]
            values = registered
    return values[0], stages


def delayed(m, value, cycles, name, *, reset_less=False):
    """``value`` through ``cycles`` registers (a shift register; ``value`` itself for 0).
    ``reset_less`` for data whose value is read only beside a valid flag: it keeps the reset
    net off wide registers."""
    value = Value.cast(value)
    for i in range(cycles):
        register = Signal(value.shape(), name=f"{name}_d{i + 1}", reset_less=reset_less)
        m.d.sync += register.eq(value)
        value = register
    return value


def lookup(bits, function):
    """``function(bits)`` of a few bits, as a constant table indexed by them: a LUT level per
    output bit (for up to four bits), where Yosys would map an adder or a compare to a chain
    of carry cells."""
    n = len(bits)
    outputs = [int(function(x)) for x in range(1 << n)]
    width = max(max(outputs).bit_length(), 1)
    table = Const(sum(v << (width * x) for x, v in enumerate(outputs)), width << n)
    return table.word_select(Cat(bits), width)


def log2(value):
    """log2 of a power of two."""
    return value.bit_length() - 1


def mux_tree(values, index):
    """``values[index]`` as a balanced tree of 2:1 multiplexers (indices past the end give the
    last value)."""
    values = list(values)
    bit = 0
    while len(values) > 1:
        if len(values) % 2:
            values.append(values[-1])
        values = [Mux(index[bit], values[i + 1], values[i]) for i in range(0, len(values), 2)]
        bit += 1
    return values[0]


# --- prefix sums and selection (compactor, expander, replicated GEMM) ------------------------

def prefix_sums(bits):
    """``(pos, total)``: ``pos[i]`` = sum of ``bits[:i]`` (exclusive scan, log depth)."""
    n = len(bits)
    inclusive = [Cat(b) for b in bits]
    step = 1
    while step < n:
        inclusive = [inclusive[i] + inclusive[i - step] if i >= step else inclusive[i]
                     for i in range(n)]
        step *= 2
    return [Const(0, 1)] + inclusive[:-1], inclusive[-1]


def _group_counts(bits, offset=lambda i: 0):
    """Per group of four bits, its popcount and the exclusive prefix counts inside it (plus
    ``offset(i)`` for bit ``i``): table lookups, one LUT level each. Returns
    ``(group_counts, inner)``, ``inner`` per bit."""
    n = len(bits)
    group_counts, inner = [], []
    for k in range(0, n, 4):
        group = [bits[i] for i in range(k, min(k + 4, n))]
        group_counts.append(lookup(group, _ones))
        inner += [Const(offset(k))] + [lookup(group[:e], lambda x, i=k + e: _ones(x) + offset(i))
                                       for e in range(1, len(group))]
    return group_counts, inner


def _ones(x):
    return bin(x).count("1")


def fast_prefix_sums(bits, offset=lambda i: 0):
    """:func:`prefix_sums` (same values, plus ``offset(i)`` on ``pos[i]`` for free) as lookups
    per group of four bits, then adders over the groups: log2(len/4) + 1 adder levels where
    :func:`prefix_sums` has log2(len)."""
    group_counts, inner = _group_counts(bits, offset)
    group_pos, total = prefix_sums(group_counts)
    return [group_pos[i // 4] + inner[i] for i in range(len(bits))], total


def staged_prefix_sums(m, bits, *, name):
    """:func:`fast_prefix_sums` as a pipeline of two stages, each ending in registers: the
    lookups, then the adders (two levels up to 16 bits). Returns ``(pos, total)``, valid
    two cycles after ``bits``."""
    n = len(bits)
    group_counts, inner = _group_counts(bits)
    group_regs = [Signal(range(min(4, n - 4 * g) + 1), name=f"{name}_group{g}")
                  for g in range(len(group_counts))]
    inner_regs = [Signal(range(i % 4 + 1), name=f"{name}_inner{i}") for i in range(n)]
    m.d.sync += [r.eq(v) for r, v in zip(group_regs + inner_regs, group_counts + inner)]
    group_pos, total = prefix_sums(group_regs)
    pos = [Signal(range(i + 1), name=f"{name}_pos{i}") for i in range(n)]
    total_reg = Signal(range(n + 1), name=f"{name}_total")
    m.d.sync += [p.eq(group_pos[i // 4] + inner_regs[i]) for i, p in enumerate(pos)]
    m.d.sync += total_reg.eq(total)
    return pos, total_reg


def popcount(bits):
    return prefix_sums(bits)[1] if len(bits) else Const(0, 1)


def select_onehot(elements, hits, width):
    """OR of the ``elements`` whose ``hits`` bit is set (at most one is), as a balanced tree:
    a chain one OR per element is as deep as there are elements, and past ~300 of them
    Amaranth's recursive expression walk exceeds Python's recursion limit (k >= 320 in the
    replicated GEMM)."""
    terms = [Mux(h, e, 0) for e, h in zip(elements, hits)]
    if not terms:
        return Const(0, width)
    while len(terms) > 1:
        paired = [terms[i] | terms[i + 1] for i in range(0, len(terms) - 1, 2)]
        if len(terms) % 2:
            paired.append(terms[-1])
        terms = paired
    return terms[0]


#: Memory attribute telling Yosys that no read meets a write of the same word in one cycle, so
#: it need not define which word such a read returns. Without it, Yosys's ECP5 mapping puts a
#: 2:1 LUT after each block RAM data bit (a flip-flop copy of the word written, selected when
#: the addresses met): the engine's slowest path, block RAM -> that LUT -> ``out_word``.
NO_RW_CHECK = {"no_rw_check": 1}


class BlockRamFifo(fifo.SyncFIFOBuffered):
    """:class:`amaranth.lib.fifo.SyncFIFOBuffered`, its storage marked :data:`NO_RW_CHECK`: a
    FIFO reads an entry only while it holds it (``level != 0``) and writes only a free one, so
    a read and a write never meet on one entry. Nothing else differs (the same Verilog but for
    the attribute)."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.submodules.storage.attrs.update(NO_RW_CHECK)
        return m
