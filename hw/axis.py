"""The one adapter between Amaranth stream components and AXI4-Stream named Verilog tops.

A block is written as an ordinary :class:`wiring.Component` whose stream members are
:class:`amaranth.lib.stream.Signature` interfaces named after their AXI base name
(``s_axis``, ``m_axis_stats``, ...). Their payload is a :class:`data.StructLayout` with a
``data`` field (becomes ``tdata``) and optionally ``last`` (``tlast``) and ``user``
(``tuser``). Every other member is a plain port and keeps its name.

:class:`AxisTop` wraps such a component into a flat top-level with exactly the port names of
docs/interfaces.md#axi4-stream-ports, and :func:`stream_fields` describes each stream's
``tdata``/``tuser`` bit fields for the manifest, derived from the same layouts so the two can
never disagree.

``tdata`` ports are whole bytes, as AXI4-Stream requires
(docs/interfaces.md#lane-packing-and-tdata-width): the payload keeps the low bits exactly as the
layout places them, the pad bits above it are driven 0 on an output and ignored on an input. The
padding lives here, in the top only, so the components themselves (and the formal and amaranth.sim
tests of them) never see it.
"""

from __future__ import annotations

from amaranth.hdl import Module, Shape, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["AxisTop", "stream_fields", "is_stream_member", "padded_width"]

_SIDEBANDS = {"data": "tdata", "last": "tlast", "user": "tuser"}


def padded_width(bits):
    """Width of a ``tdata`` port carrying ``bits`` payload bits: the next whole byte."""
    return -(-bits // 8) * 8


def _port_width(field, shape):
    width = Shape.cast(shape).width
    return padded_width(width) if field == "data" else width


def is_stream_member(member):
    return member.is_signature and isinstance(member.signature, stream.Signature)


def _payload_layout(member):
    layout = data.Layout.cast(member.signature.members["payload"].shape)
    if not isinstance(layout, data.StructLayout) or "data" not in layout.members:
        raise TypeError("a stream payload must be a StructLayout with a 'data' field")
    unknown = set(layout.members) - set(_SIDEBANDS)
    if unknown:
        raise TypeError(f"stream payload fields must be data/last/user, not {sorted(unknown)}")
    return layout


def _is_input(member):
    # An In(stream.Signature) member is a stream the component receives.
    return member.flow == In


class AxisTop(wiring.Component):
    """Flat AXI4-Stream port names around ``inner``; no logic of its own but the ``tdata``
    padding (zeros out, ignored in)."""

    def __init__(self, inner: wiring.Component):
        self._inner = inner
        members = {}
        for name, member in inner.signature.members.items():
            if is_stream_member(member):
                layout = _payload_layout(member)
                toward = In if _is_input(member) else Out
                back = Out if _is_input(member) else In
                for field, suffix in _SIDEBANDS.items():
                    if field in layout.members:
                        width = _port_width(field, layout[field].shape)
                        members[f"{name}_{suffix}"] = toward(width)
                members[f"{name}_tvalid"] = toward(1)
                members[f"{name}_tready"] = back(1)
            elif member.is_port:
                members[name] = member
            else:
                raise TypeError(f"port {name} must be a stream or a plain signal")
        super().__init__(members)

    @property
    def inner(self):
        return self._inner

    def elaborate(self, platform):
        m = Module()
        m.submodules.core = inner = self._inner
        for name, member in inner.signature.members.items():
            port = getattr(inner, name)
            if not is_stream_member(member):
                if _is_input(member):
                    m.d.comb += port.eq(getattr(self, name))
                else:
                    m.d.comb += getattr(self, name).eq(port)
                continue
            layout = _payload_layout(member)
            for field, suffix in _SIDEBANDS.items():
                if field in layout.members:
                    flat = getattr(self, f"{name}_{suffix}")
                    inside = Value.cast(port.payload[field])
                    if _is_input(member):
                        m.d.comb += inside.eq(flat[:len(inside)])   # pad bits unread
                    else:
                        # Zero-extended (as_unsigned: a signed payload must not sign-extend
                        # into the pad bits): the pad is 0.
                        m.d.comb += flat.eq(inside.as_unsigned())
            valid, ready = getattr(self, f"{name}_tvalid"), getattr(self, f"{name}_tready")
            if _is_input(member):
                m.d.comb += [port.valid.eq(valid), ready.eq(port.ready)]
            else:
                m.d.comb += [valid.eq(port.valid), port.ready.eq(ready)]
        return m


def _fields(shape, default_name):
    """Named bit fields of one payload field: struct members, array lanes, or one whole field."""
    if isinstance(shape, data.StructLayout):
        out = []
        for name, field in shape:
            width = Shape.cast(field.shape).width
            out.append({"name": name, "lsb": field.offset, "width": width})
        return out
    if isinstance(shape, data.ArrayLayout):
        width = Shape.cast(shape.elem_shape).width
        return [{"name": f"lane{i}", "lsb": i * width, "width": width} for i in range(shape.length)]
    return [{"name": default_name, "lsb": 0, "width": Shape.cast(shape).width}]


def stream_fields(component: wiring.Component):
    """Manifest ``streams`` section for every stream member of ``component``."""
    streams = {}
    for name, member in component.signature.members.items():
        if not is_stream_member(member):
            continue
        layout = _payload_layout(member)
        data_shape = layout["data"].shape
        entry = {
            "dir": "in" if _is_input(member) else "out",
            "beat_bits": Shape.cast(data_shape).width,
            "tdata_width": padded_width(Shape.cast(data_shape).width),
            "has_tlast": "last" in layout.members,
            "fields": _fields(data_shape, "data"),
        }
        if "user" in layout.members:
            entry["tuser"] = _fields(layout["user"].shape, "user")
        streams[name] = entry
    return streams
