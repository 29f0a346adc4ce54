"""What the user typed, checked: the errors every ``spartan`` command reports the same way.

A mistake in the request is a :class:`UsageError` (one line on stderr, exit status 2, nothing
written); a failure while doing a checked request is a :class:`Bug` (exit status 70). The CLI
(spartan_rtl/cli.py) and the commands with parsers of their own (spartan_rtl/sim.py,
spartan_rtl/waves.py, spartan_rtl/explore.py, spartan_rtl/fusesoc_library.py) check their
inputs with these helpers; this module imports none of them, so none imports the CLI back.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import tomllib

#: A ``--config`` file larger than this is no parameter file (and reading ``/dev/zero`` would
#: never end).
CONFIG_MAX_BYTES = 1 << 20

#: TOML tables and arrays nested deeper than this hold no parameter set.
CONFIG_MAX_DEPTH = 16


class UsageError(Exception):
    """A mistake in what the user asked for: reported in one line, exit status 2."""


class Bug(Exception):
    """An internal error while doing what a checked request asked: exit status 70."""


def parse_sets(block, items):
    values = {}
    for item in items or ():
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise UsageError(f"--set must be NAME=VALUE, not {item!r}")
        values[name.strip()] = block.param(name.strip()).parse(text.strip())
    return values


def _depth(value):
    """Nesting depth of TOML tables and arrays, without recursion."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= CONFIG_MAX_DEPTH:
            children = item.values() if isinstance(item, dict) else \
                item if isinstance(item, list) else ()
            stack += [(child, depth + 1) for child in children]
    return deepest


def read_config(path):
    """Parameters from a TOML file: top-level ``name = value`` pairs, and those of a
    ``[params]`` table if there is one (a ``params`` that is no table is an unknown name)."""
    what = "--config must be a readable TOML file"
    try:
        # stat before open: opening a named pipe would wait for a writer forever.
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            raise UsageError(f"{what}, not {str(path)!r} (no regular file)")
        with open(path, "rb") as f:
            raw = f.read(CONFIG_MAX_BYTES + 1)
    except OSError as e:
        raise UsageError(f"{what}, not {str(path)!r} ({e.strerror})") from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise UsageError(f"{what} of at most {CONFIG_MAX_BYTES} bytes, not {str(path)!r}")
    try:
        doc = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"{what} in UTF-8, not {str(path)!r} (byte {e.start})") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"{what}, not {str(path)!r} ({e})") from None
    except RecursionError:
        raise UsageError(f"{what} nested at most {CONFIG_MAX_DEPTH} deep, not "
                         f"{str(path)!r}") from None
    if _depth(doc) > CONFIG_MAX_DEPTH:
        raise UsageError(f"{what} nested at most {CONFIG_MAX_DEPTH} deep, not {str(path)!r}")
    values = dict(doc)
    if isinstance(doc.get("params"), dict):
        values.update(values.pop("params"))
    return values


def block_values(block, config, sets):
    """The checked parameters from ``--config`` and ``--set``; any mistake is a UsageError."""
    values = read_config(config) if config else {}
    values.update(as_usage(parse_sets, block, sets))
    return as_usage(block.resolve, values)


def as_usage(function, *args, **kwargs):
    """Run a check of what the user gave; its ``ValueError``/``TypeError`` is a usage error."""
    try:
        return function(*args, **kwargs)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None


def check_output_file(path, option, new_folders=False):
    """UsageError unless a file can be written at ``path``: checked before any work, so a typo
    in an output path costs nothing and leaves nothing. Its folder must exist (or, with
    ``new_folders``, be a path where one can be created); see ``emit.check_outputs`` for the
    rest. Changes nothing."""
    from .hw import emit
    if not str(path):
        raise UsageError(f"{option} must be a file path, not ''")
    as_usage(emit.check_outputs, [Path(path)], option)
    folder = Path(os.path.abspath(path)).parent
    if not new_folders and not folder.is_dir():
        raise UsageError(f"{option} must be a file in an existing folder, not {str(path)!r} "
                         f"({str(folder)!r} does not exist)")


def write_output_file(path, text, option):
    """Write ``text`` to ``path`` whole or not at all (mode 0644), as ``generate`` does."""
    from .hw import emit
    try:
        emit.write_atomically({Path(path): text}, option)
    except emit.OutputError as e:
        raise UsageError(str(e)) from None


def add_param_options(parser):
    parser.add_argument("--set", action="append", metavar="NAME=VALUE",
                        help="set a parameter (repeatable)")
    parser.add_argument("--config", metavar="FILE.toml", help="parameters from a TOML file")


def require_modules(what, extra, modules):
    """UsageError saying that ``what`` needs ``extra`` when one of ``modules`` is absent."""
    from importlib.util import find_spec

    def absent(module):
        try:
            return find_spec(module) is None
        except ModuleNotFoundError:    # its parent package is missing
            return True

    missing = [m for m in modules if absent(m)]
    if missing:
        raise UsageError(f"{what} needs the '{extra}' extra (module {missing[0]} is "
                         f"missing): pip install 'spartan-rtl[{extra}]'")
