"""FuseSoC generator script of ``spartan.core``: ``spartan fusesoc-gen INPUT.yml``.

FuseSoC runs it with ``python3`` from PATH. When that interpreter cannot import the project
(no Amaranth), it re-runs itself with the project's virtual environment (``make venv``)."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"

try:
    import amaranth  # noqa: F401  (the project's one hard dependency)
except ImportError:
    # The venv's python is a link to the base interpreter: compare the paths, not the targets.
    if VENV_PYTHON.exists() and not os.environ.get("SPARTAN_GEN_REEXEC"):
        os.environ["SPARTAN_GEN_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [str(VENV_PYTHON), __file__, *sys.argv[1:]])
    sys.exit(f"spartan: error: the generator needs the project's Python environment: run "
             f"`make venv` in {ROOT}")

sys.path.insert(0, str(ROOT))
from spartan_rtl.cli import main  # noqa: E402

sys.exit(main(["fusesoc-gen", *sys.argv[1:]]))
