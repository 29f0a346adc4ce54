"""Block parameters: defaults, allowed ranges and the errors for values outside them.

Every error reads ``"<name> must be <what>, not <value>"``: the same sentence serves the
Python constructor, the CLI and the manifest's documentation of the range. Checks run before
any hardware is built.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Param:
    """One generator parameter.

    ``what`` completes "<name> must be ..." and doubles as the range shown by ``spartan list``.
    ``kind`` is the Python type accepted (``int``, ``str`` or ``bool``); ``ok`` tells whether a
    value of that type is in range.
    """

    name: str
    default: Any
    kind: type
    what: str
    doc: str
    ok: Callable[[Any], bool]
    choices: tuple = ()     # a text parameter's values, in order (its CONFIG register's codes)

    def check(self, value):
        """Return ``value`` if it is valid, else raise ``TypeError``/``ValueError``."""
        # bool is an int subclass; a flag where a number is expected is a type error.
        if not isinstance(value, self.kind) or (self.kind is int and isinstance(value, bool)):
            raise TypeError(f"{self.name} must be {self.what}, not {value!r}")
        if not self.ok(value):
            raise ValueError(f"{self.name} must be {self.what}, not {value!r}")
        return value

    def parse(self, text: str):
        """Convert command-line text to this parameter's type (then :meth:`check` it)."""
        if self.kind is int:
            try:
                return self.check(int(text, 0))
            except ValueError:
                if _is_int_text(text):
                    raise
                raise ValueError(f"{self.name} must be {self.what}, not {text!r}") from None
        if self.kind is bool:
            lowered = text.strip().lower()
            if lowered in ("1", "true", "yes", "on"):
                return True
            if lowered in ("0", "false", "no", "off"):
                return False
            raise ValueError(f"{self.name} must be {self.what}, not {text!r}")
        return self.check(text)


def _is_int_text(text):
    try:
        int(text, 0)
        return True
    except ValueError:
        return False


def power_of_two(name, default, lo, hi, doc):
    return Param(name, default, int, f"a power of two from {lo} to {hi}", doc,
                 lambda v: lo <= v <= hi and v & (v - 1) == 0)


def integer(name, default, lo, hi, doc):
    return Param(name, default, int, f"an integer from {lo} to {hi}", doc,
                 lambda v: lo <= v <= hi)


def choice(name, default, choices, doc):
    listed = " or ".join(repr(c) for c in choices)
    return Param(name, default, str, f"one of {listed}", doc, lambda v: v in choices,
                 tuple(choices))


def flag(name, default, doc):
    return Param(name, default, bool, "true or false", doc, lambda v: True)


# The parameters most blocks share, declared once so their ranges agree everywhere.
def lanes_param(default=8):
    return power_of_two("lanes", default, 1, 64, "elements per stream beat")


def width_param(default=8, lo=1):
    return integer("width", default, lo, 64, "bits per element")


def number_format_param(default="int"):
    return choice("number_format", default, ("int", "fp"),
                  "element format: two's complement, or sign-magnitude float (either zero counts)")


def not_one_of(what, name, known):
    """The one-line message for a name that is not among ``known``: "<what> must be one of
    ..., not 'x'", with the nearest known name suggested when one is close (a misspelling)."""
    near = difflib.get_close_matches(str(name), list(known), n=1, cutoff=0.6)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return f"{what} must be one of {', '.join(known)}, not {name!r}{hint}"


@dataclass(frozen=True)
class Derived:
    """A default that follows other parameters: a parameter the user leaves out takes
    ``value(params, default)`` (``params``: the ones declared before it, checked) instead of its
    fixed default, so setting only what it follows still makes a valid configuration."""

    follows: tuple
    rule: str   # what it is, for ``spartan list`` and errors; ``{default}``: the fixed default
    value: Callable[[dict, Any], Any]

    def describe(self, param):
        return self.rule.format(default=param.default)


#: Derived defaults by parameter name, declared once so every block with the parameter agrees
#: (docs/interfaces.md, "Blocks"). At the fixed defaults each equals the fixed default, so an
#: unchanged configuration generates the same Verilog.
DERIVED = {
    # The GEMM's (and the core's and engine's) column group must divide n: n=32 alone works.
    "n_par": Derived(("n",), "the largest power of two up to {default} that divides n",
                     lambda p, default: min(p["n"] & -p["n"], default)),
    # The engine's bus word is one beat of elements.
    "data_width": Derived(("lanes", "width"), "lanes*width",
                          lambda p, default: p["lanes"] * p["width"]),
}


#: What an elaboration-size bound (:class:`SizeBound`) keeps ``spartan generate`` within, on the
#: machine the bounds were measured on (docs/interfaces.md, "Elaboration size").
SIZE_BUDGET = "about 6 GB of memory and 5 minutes"


@dataclass(frozen=True)
class SizeBound:
    """A bound on a block's elaboration size: the estimate, a sum of ``terms``, must be at most
    ``limit``. Checked after every parameter and every rule between them, before anything is
    built, so a configuration that would exhaust memory or time is a usage error instead.

    ``terms``: ``((name, formula, f), ...)``: ``f(params)`` is the term's size, ``formula`` how
    it is computed (for ``spartan list`` and errors), ``name`` the parameter an error names when
    this term is the largest. Each ``f`` grows with every parameter it reads."""

    terms: tuple
    limit: int

    def estimate(self, p):
        return sum(f(p) for _, _, f in self.terms)

    def formula(self):
        return " + ".join(formula for _, formula, _ in self.terms)

    def describe(self):
        return (f"{self.formula()} at most {self.limit} (generation within {SIZE_BUDGET}; "
                "larger configurations are refused)")

    def largest_fitting(self, p, param, valid):
        """The largest value ``param`` accepts, below the one in ``p``, that keeps the estimate
        within the limit and the configuration ``valid`` (the others as in ``p``), or None."""
        def fits(v):
            return self.estimate({**p, param.name: v}) <= self.limit
        lo, hi = 0, p[param.name] - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
        for v in range(lo, max(lo - 4096, 0), -1):
            if param.ok(v) and fits(v) and valid({**p, param.name: v}):
                return v
        return None

    def check(self, p, params, valid=lambda p: True, block="BLOCK"):
        """Raise "<name> must be at most <value> ..., not <value>" when ``p`` is over the
        limit, naming the parameter of the largest term that alone can shrink enough (keeping
        the configuration ``valid``), else that of the largest term."""
        size = self.estimate(p)
        if size <= self.limit:
            return
        by_name = {q.name: q for q in params}
        ranked = sorted(self.terms, key=lambda t: -t[2](p))
        for name, _, _ in ranked:
            best = self.largest_fitting(p, by_name[name], valid)
            if best is not None:
                what = f"at most {best} with the other parameters as given"
                break
        else:
            name, what = ranked[0][0], "smaller, and other parameters too"
        raise ValueError(f"{name} must be {what} (elaboration size {size}, over the bound "
                         f"{self.limit} that keeps generation within {SIZE_BUDGET}; the "
                         f"formula: spartan list {block}), not {p[name]!r}")


def derived(param, earlier):
    """The :class:`Derived` rule of ``param``, or None: it has none, or a parameter the rule
    reads is not among ``earlier`` (the names declared before it in its block)."""
    rule = DERIVED.get(param.name)
    return rule if rule is not None and set(rule.follows) <= set(earlier) else None


def resolve(params, values):
    """Defaults overlaid with ``values``, each checked in declaration order; a parameter not
    given that follows others (:data:`DERIVED`) is computed from them. Unknown names are an
    error."""
    by_name = {p.name: p for p in params}
    for name in values:
        if name not in by_name:
            raise ValueError(not_one_of("parameter", name, by_name))
    resolved = {}
    for p in params:
        rule = None if p.name in values else derived(p, resolved)
        if rule is None:
            resolved[p.name] = p.check(values.get(p.name, p.default))
            continue
        try:
            resolved[p.name] = p.check(rule.value(resolved, p.default))
        except ValueError as e:   # the user set only what it follows: say how it came about
            raise ValueError(f"{e} (its default when not set: {rule.describe(p)})") from None
    return resolved
