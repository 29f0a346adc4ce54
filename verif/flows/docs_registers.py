"""``make docs-registers``: write docs/registers.md, the Markdown reference of the default
core's register map (PeakRDL's, through :func:`spartan_rtl.hw.registers.render`).

``python -m verif.flows.docs_registers FILE.md``. A flow, not a part of hw/registers.py: the
renderer takes any register map and so never imports the core whose map this page shows.
"""

from __future__ import annotations

import sys
from pathlib import Path

from spartan_rtl.hw.core import BLOCK, SpartanCore
from spartan_rtl.hw.registers import file_names, render


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1 or not argv[0].endswith(".md"):
        print(f"python -m verif.flows.docs_registers: the argument must be one output path "
              f"ending in .md (the default core's register reference), not {argv!r}",
              file=sys.stderr)
        return 2
    core = SpartanCore()
    text = render(core.regmap, BLOCK.top)[file_names(BLOCK.top)["markdown"]]
    try:
        Path(argv[0]).write_text(text)
    except OSError as e:
        print(f"{argv[0]}: the output file must be writable ({e.strerror})", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
