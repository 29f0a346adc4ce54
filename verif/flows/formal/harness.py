"""The harness a check wraps its block in: every input free (``AnySeq``), the input channels
keeping the AXI handshake rules (assumed), every output channel stable until its transfer
(asserted) and its held beat taken (covered), then the check's own properties; and the
channels of a block, found from its signature."""

from __future__ import annotations

from dataclasses import dataclass

from amaranth.hdl import Cat, Const, Elaboratable, Module, Signal, Value
from amaranth.hdl._ast import AnySeq, Assert, Assume, Cover
from amaranth.lib import stream, wiring

from .internals import Internals, elaborate_keeping_locals


@dataclass
class Channel:
    name: str
    valid: object
    ready: object
    payload: object       # an Amaranth value (Cat of the payload signals)
    output: bool          # True: the block drives valid and payload


def channels(dut):
    """Every handshake of ``dut``: its ``stream.Signature`` members, the AXI4-Lite channels
    of flat ``s_axil_*`` ports (a slave's) and the AXI4 channels of flat ``m_axi_*`` ports (a
    master's: AW, W, AR out, B, R in)."""
    found = []
    members = dut.signature.members
    for name, member in members.items():
        if member.is_signature and isinstance(member.signature, stream.Signature):
            port = getattr(dut, name)
            found.append(Channel(name, port.valid, port.ready, Value.cast(port.payload),
                                 output=member.flow == wiring.Out))
    for side, outputs in (("s_axil", ("b", "r")), ("m_axi", ("aw", "w", "ar"))):
        for ch in ("aw", "w", "ar", "b", "r"):
            found += _flat_channel(dut, f"{side}_{ch}", output=ch in outputs)
    return found


def _flat_channel(dut, prefix, output):
    members = dut.signature.members
    if prefix + "valid" not in members:
        return []
    payload = [getattr(dut, n) for n in members
               if n.startswith(prefix) and n not in (prefix + "valid", prefix + "ready")]
    return [Channel(prefix, getattr(dut, prefix + "valid"), getattr(dut, prefix + "ready"),
                    Cat(*payload), output=output)]


def _input_signals(dut):
    """Every signal the environment drives: a stream's valid/payload (input streams) or ready
    (output streams), and plain input ports."""
    for name, member in dut.signature.members.items():
        port = getattr(dut, name)
        if member.is_signature and isinstance(member.signature, stream.Signature):
            if member.flow == wiring.In:
                yield port.valid
                yield Value.cast(port.payload)
            else:
                yield port.ready
        elif member.is_port and member.flow == wiring.In:
            yield port


class Harness(Elaboratable):
    """``dut`` with free inputs, AXI-compliant input channels and ``props(m, dut, h)`` added.

    ``h`` offers ``fire(channel)`` (a transfer this cycle), ``counter(m, event, limit)``,
    ``outstanding(m, up, down, limit)`` and ``internals`` (:class:`Internals`, after the
    block is elaborated)."""

    def __init__(self, dut, props=(), *, stable=True):
        self.dut = dut
        self.props = props
        self.stable = stable

    @staticmethod
    def fire(ch):
        return ch.valid & ch.ready

    @staticmethod
    def counter(m, event, limit, name):
        """Events so far (saturating at ``limit``); cleared by reset like the design."""
        count = Signal(range(limit + 1), name=name)
        with m.If(event & (count != limit)):
            m.d.sync += count.eq(count + 1)
        return count

    @staticmethod
    def outstanding(m, up, down, limit, name):
        """Events ``up`` not yet matched by a ``down`` (``down`` before any ``up`` would wrap,
        which the properties assert against); cleared by reset. Unlike :meth:`counter` it stays
        small in a long trace, so an assertion on it can be inductive."""
        count = Signal(range(limit + 1), name=name)
        m.d.sync += count.eq(count + up - down)
        return count

    def elaborate(self, platform):
        m = Module()
        dut = self.dut
        # Elaborated here, not by the converter, so the invariants can name its local signals.
        fragment, local_vars = elaborate_keeping_locals(dut, platform)
        self.internals = Internals(fragment, local_vars)
        m.submodules.dut = fragment
        for sig in _input_signals(dut):
            m.d.comb += sig.eq(AnySeq(len(sig)))
        for ch in channels(dut):
            # Last cycle's handshake state; registers of the reset domain, so a reset clears
            # them and with them the obligation (AXI lets valid drop across a reset).
            held = Signal(name=f"{ch.name}_held")
            past = Signal(len(ch.payload), name=f"{ch.name}_past")
            m.d.sync += [held.eq(ch.valid & ~ch.ready), past.eq(ch.payload)]
            keeps = ch.valid & (ch.payload == past)
            if not ch.output:
                with m.If(held):
                    m.d.comb += Assume(keeps)
            else:
                if self.stable:
                    with m.If(held):
                        m.d.comb += Assert(keeps, f"{ch.name}: valid dropped or payload changed")
                # Reachability: within the bound a beat of this output is held and then taken,
                # so the stability assertion was exercised, not vacuous.
                m.d.comb += Cover(held & self.fire(ch), f"{ch.name}: a held beat transfers")
        for prop in self.props:
            prop(m, dut, self)
        return m


def _chan(dut, name):
    return next(c for c in channels(dut) if c.name == name)


def _nonzero(value):
    return value != 0


def _popcount(bits):
    return sum((bits[i] for i in range(len(bits))), Const(0, range(len(bits) + 1)))
