"""The block's own signals, for the invariants k-induction needs: :class:`Internals` finds the
signals and memories a block's ``elaborate`` keeps local by name in its elaborated fragment (and
its local variables, :func:`elaborate_keeping_locals`), so ``hw/*.py`` and its Verilog stay as
they are; :func:`fifo_entries` reads an ``amaranth.lib.fifo`` FIFO's entries, oldest first."""

from __future__ import annotations

import sys

from amaranth.hdl import Const, Mux, Shape, Signal, Value
from amaranth.hdl._ir import Fragment
from amaranth.hdl._mem import MemoryInstance
from amaranth.utils import ceil_log2


class Internals:
    """The signals a block's ``elaborate`` keeps local (a counter, a pipeline's valid flags, a
    FIFO's level), found by name in the block's elaborated fragment, so the harness can state
    the invariants k-induction needs without changing ``hw/*.py`` (nor its generated Verilog).

    ``internals["output/count"]``: the signal named ``count`` driven in the fragment of a
    submodule path ending in ``output`` (``"waiting"``: in any fragment). A signal whose name
    Amaranth could not infer (``row, beat = Signal(16), Signal(16)`` names only ``beat``) or
    which shares its name with a port is found by its local variable name in that fragment's
    ``elaborate`` instead (``local_vars``: :func:`elaborate_keeping_locals`). A name that is
    missing or ambiguous raises, so a renamed signal breaks the check loudly.

    ``internals.row("lengths/storage", n)``: row ``n`` of the memory at that path, through a
    combinational read port added to it (for the harness's assertions only: the block's ports
    and behaviour are unchanged), so an invariant can say what a FIFO's memory holds."""

    def __init__(self, fragment, local_vars=None):
        self._found = {}
        self._locals = {}
        self._memories = {}
        self._rows = {}
        self._walk(fragment, (), local_vars or {})

    def _walk(self, fragment, path, local_vars):
        if isinstance(fragment, MemoryInstance):
            self._memories[path] = fragment
        for origin in getattr(fragment, "origins", None) or ():
            for name, value in local_vars.get(id(origin), {}).items():
                if isinstance(value, Value):
                    self._locals[(path, name)] = value
        for statements in fragment.statements.values():
            for statement in statements:
                for sig in statement._lhs_signals():
                    self._found.setdefault((path, sig.name), {})[id(sig)] = sig
        for sub, name, _ in fragment.subfragments:
            self._walk(sub, path + (name,), local_vars)

    @staticmethod
    def _split(where):
        *scope, name = where.split("/")
        return tuple(scope), name

    @staticmethod
    def _in(path, scope):
        return path[len(path) - len(scope):] == scope

    def __getitem__(self, where):
        scope, name = self._split(where)
        hits = [sig for (path, n), sigs in self._found.items()
                if n == name and self._in(path, scope) for sig in sigs.values()]
        if len(hits) == 1:
            return hits[0]
        local = [v for (path, n), v in self._locals.items() if n == name and self._in(path, scope)]
        if len(local) == 1:
            return local[0]
        raise LookupError(f"{len(hits)} signals {where!r} in the block ({len(local)} local "
                          "variables of that name): the invariants name signals local to "
                          "hw/*.py, update them with it")

    def memory(self, where):
        """The memory (``MemoryInstance``) at the submodule path ``where``."""
        scope = tuple(where.split("/"))
        hits = [mem for path, mem in self._memories.items() if self._in(path, scope)]
        if len(hits) != 1:
            raise LookupError(f"{len(hits)} memories {where!r} in the block")
        return hits[0]

    def row(self, where, index):
        """Row ``index`` of the memory ``where`` (a combinational read port, added once)."""
        mem = self.memory(where)
        key = (id(mem), index)
        if key not in self._rows:
            depth, shape = mem._data.depth, Shape.cast(mem._data.shape)
            if index not in range(depth):
                raise IndexError(f"row {index} of the {depth} of memory {where!r}")
            data = Signal(shape, name=f"{where.replace('/', '_')}_row{index}")
            mem.read_port(domain="comb", addr=Const(index, ceil_log2(depth)), data=data,
                          en=Const(1), transparent_for=())
            self._rows[key] = data
        return self._rows[key]


def elaborate_keeping_locals(dut, platform):
    """``Fragment.get(dut, platform)``, and the local variables of every ``elaborate`` it ran
    (by the elaboratable's ``id``), as :class:`Internals` takes them."""
    local_vars = {}

    def profile(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "elaborate":
            owner = frame.f_locals.get("self")
            if owner is not None:
                local_vars[id(owner)] = dict(frame.f_locals)

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        fragment = Fragment.get(dut, platform)
    finally:
        sys.setprofile(previous)
    return fragment, local_vars


def fifo_entries(internals, where):
    """The entries of the ``amaranth.lib.fifo.SyncFIFOBuffered`` at ``where``, oldest first:
    ``(present, data)`` per place. Its oldest entry is in the output register (``r_data``)
    while ``r_rdy``, the others in its memory from ``consume`` on (all of them for the cycle
    an entry moves from the memory to an empty output register)."""
    i = internals
    mem = i.memory(f"{where}/storage")
    inner = mem._data.depth
    rows = [i.row(f"{where}/storage", n) for n in range(inner)]
    consume, r_rdy, level = i[f"{where}/consume"], i[f"{where}/r_rdy"], i[f"{where}/level"]

    def ring(k):
        if inner == 1:
            return rows[0]
        index = consume + k
        return _mux_const(Mux(index >= inner, index - inner, index), rows)

    entries = []
    for j in range(inner + 1):
        in_memory = ring(j) if j < inner else Const(0, len(rows[0]))
        entries.append((level > j, Mux(r_rdy, i[f"{where}/r_data"] if j == 0 else ring(j - 1),
                                       in_memory)))
    return entries


def _mux_const(index, values):
    """``values[index]`` for a small index, as a chain of comparisons."""
    result = values[-1]
    for n in range(len(values) - 2, -1, -1):
        result = Mux(index == n, values[n], result)
    return result
