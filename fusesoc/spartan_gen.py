"""FuseSoC generator script of ``spartan.core``: ``spartan fusesoc-gen INPUT.yml``.

FuseSoC runs it with the core's ``interpreter``. In the source tree's ``fusesoc/spartan.core``
that is ``python3`` from PATH; when it cannot import the project (no Amaranth), the script
re-runs itself with the project's virtual environment (``make venv``). The wheel installs this
folder as ``spartan_rtl/fusesoc``, and ``spartan fusesoc-library DIR`` writes a copy of the core
whose interpreter is the installation's own Python (spartan_rtl/fusesoc_library.py)."""

import os
import sys
from pathlib import Path

#: The repository root; in the wheel, the installed spartan_rtl package.
ABOVE = Path(__file__).resolve().parent.parent
VENV_PYTHON = ABOVE / ".venv" / "bin" / "python"

try:
    import amaranth  # noqa: F401  (the project's one hard dependency)
except ImportError:
    # The venv's python is a link to the base interpreter: compare the paths, not the targets.
    if VENV_PYTHON.exists() and not os.environ.get("SPARTAN_GEN_REEXEC"):
        os.environ["SPARTAN_GEN_REEXEC"] = "1"
        os.execv(VENV_PYTHON, [str(VENV_PYTHON), __file__, *sys.argv[1:]])
    sys.exit(f"spartan: error: the generator needs a Python with spartan-rtl installed, not "
             f"{sys.executable}: run `make venv` in the source tree, or write the library of "
             f"an installation with its `spartan fusesoc-library DIR`")

# From the source tree, import the tree's spartan_rtl; in the wheel it is installed already
# (and the package's own folder must not join sys.path: its modules would shadow others).
if (ABOVE / "spartan_rtl" / "__init__.py").is_file():
    sys.path.insert(0, str(ABOVE))
from spartan_rtl.cli import main  # noqa: E402

sys.exit(main(["fusesoc-gen", *sys.argv[1:]]))
