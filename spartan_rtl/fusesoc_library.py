"""``spartan fusesoc-library DIR``: FuseSoC's generator library for this installation.

The generator core (``fusesoc/spartan.core``, in the wheel ``spartan_rtl/fusesoc/``) runs its
script with ``python3`` from PATH, which in a user's shell need not be the Python that has
spartan-rtl. The copy written here names this installation's interpreter and the installed
script by absolute path, so ``fusesoc library add spartan DIR`` works from any shell, with or
without the virtual environment activated (docs/interfaces.md, "FuseSoC").
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import shipped

__all__ = ["CORE_NAME", "library_core", "add_parser", "cmd_fusesoc_library"]

CORE_NAME = "spartan.core"
SCRIPT_NAME = "spartan_gen.py"
#: The lines of the shipped core that the copy replaces, each exactly once.
INTERPRETER_LINE = "    interpreter: python3\n"
COMMAND_LINE = f"    command: {SCRIPT_NAME}\n"


def library_core():
    """The text of the generator core for this installation: the shipped core with its
    generator's interpreter this Python and its command the installed script, both absolute
    and quoted for YAML."""
    folder = shipped("fusesoc")
    text = (folder / CORE_NAME).read_text()
    for line in (INTERPRETER_LINE, COMMAND_LINE):
        if text.count(line) != 1:
            raise RuntimeError(f"{folder / CORE_NAME} has no single line {line.strip()!r}")
    # JSON strings are YAML double-quoted scalars: any path survives.
    script = (folder / SCRIPT_NAME).resolve()
    text = text.replace(INTERPRETER_LINE,
                        f"    interpreter: {json.dumps(sys.executable)}\n")
    return text.replace(COMMAND_LINE, f"    command: {json.dumps(str(script))}\n")


def add_parser(sub):
    p = sub.add_parser("fusesoc-library", help="write DIR/spartan.core, FuseSoC's generator "
                       "library for this installation (fusesoc library add spartan DIR)",
                       description="Write DIR/spartan.core: the FuseSoC generator library whose "
                       "generator runs this installation's script with this installation's "
                       "Python, by absolute paths. Then: fusesoc library add spartan DIR.")
    p.add_argument("folder", metavar="DIR", help="output folder, created if needed")
    p.set_defaults(func=cmd_fusesoc_library)
    return p


def cmd_fusesoc_library(args):
    from .usage import Bug, check_output_file, write_output_file
    path = Path(args.folder) / CORE_NAME
    check_output_file(path, "DIR", new_folders=True)
    try:
        text = library_core()
    except (OSError, RuntimeError) as e:   # the installation lacks its own data: a bug
        raise Bug("reading the shipped generator core failed") from e
    write_output_file(path, text, "DIR")
    print(path)
    return 0
