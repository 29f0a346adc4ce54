"""Element formats shared by every block (which bit patterns count as zero, beat layouts) and the
small hardware helpers several blocks build from (adder and multiplexer trees)."""

from amaranth.hdl import Cat, Const, Mux, Signal, Value
from amaranth.lib import data

__all__ = ["is_nonzero", "lanes_layout", "beat_layout", "tree_sum", "staged_tree_sum",
           "delayed", "lookup", "mux_tree", "log2"]


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
