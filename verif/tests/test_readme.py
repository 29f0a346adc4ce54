"""README.md's commands run as written from the repository root (issue 24: a fresh clone's
first commands must work). Every command README.md quotes (its ``sh`` code blocks and the first
column of its command tables) is either run here or skipped by name with the reason; a command
that is neither fails the test, so a new README line must be classified, and a covered command
that left README.md fails it too (the test would otherwise pass on nothing).

Run as written, with two substitutions only: the output folder (``-o out/``) is a temporary
one, and ``.venv/bin/`` is the folder of the interpreter running the tests (the same venv in a
checkout; another one in CI). A bare ``spartan`` (the README's own shorthand for the same
command in one table cell) is that folder's ``spartan`` too.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from verif.flows import ROOT

README = ROOT / "README.md"
VENV_BIN = Path(sys.executable).parent     # not resolved: the venv's own bin/, not the base's

#: Commands run here: cheap (seconds) and writing nothing outside the temporary output folder.
RUN = (
    ".venv/bin/spartan list",
    "spartan list gemm",
    "spartan --version",
    ".venv/bin/spartan generate monitor --set lanes=16 -o out/",
    ".venv/bin/spartan generate monitor --name mon16 --set lanes=16 -o out/",
    ".venv/bin/spartan estimate data/traces/digits_cnn_epoch15.npz",
)

_MAKE_LONG = "a make flow of minutes to hours; the regression and CI run it, not this test"
_WRITES_TREE = "rewrites files of the repository (generated docs, traces or builds)"

#: Commands README.md quotes that are not run here, each with the reason.
SKIPPED = {
    "make rtl": _WRITES_TREE + " (rtl_out/, which other tests read)",
    "make test": _MAKE_LONG,
    "fusesoc --cores-root out/ run --target lint spartan:rtl:mon16":
        "needs FuseSoC and a system verilator; test_ip.py lints generated cores",
    "make rtl RTL_FLAGS='--clock-mhz 200'": _WRITES_TREE + " (rtl_out/)",
    "make docs-registers": _WRITES_TREE + " (docs/registers.md)",
    "make lint": "generates and lints every block (minutes); test_ip.py covers the lint",
    ".venv/bin/spartan sim compactor":
        "builds a simulator (about 30 s) and writes waves/ in the tree; test_waves.py runs sim",
    ".venv/bin/spartan waves waves/compactor/dump.vcd -o c.png":
        "reads the waveform spartan sim compactor leaves (not run here)",
    ".venv/bin/spartan waves FILE.vcd --streams": "FILE.vcd is a placeholder, not a file",
    "make waves-docs": _WRITES_TREE + " (docs/img/)",
    "make bench": _MAKE_LONG,
    "make synth": _MAKE_LONG + " (hours)",
    ".venv/bin/spartan explore data/traces/digits_cnn_epoch15.npz --device LFE5U-25F":
        "synthesises and places engine builds (minutes; the explore extra); test_explore.py",
    "make traces": "retrains a CNN and " + _WRITES_TREE + " (data/traces/)",
    "make coverage": _MAKE_LONG,
    "make formal": _MAKE_LONG,
    "make mutants": _MAKE_LONG + " (about 50 min)",
    "make fuzz": _MAKE_LONG,
    "SIM=icarus make test": _MAKE_LONG,
    "WAVES=1 make test": _MAKE_LONG,
    "make clean": "deletes the builds other tests and engineers use",
    "make distclean": "deletes the venv this test runs in",
}

#: How a quoted span that is a command begins (the tables' first columns also quote files).
COMMAND_START = re.compile(r"^(\.venv/bin/|spartan\b|make\b|fusesoc\b|python\b|pip\b|"
                           r"[A-Z]+=\S+ make\b)")


def readme_commands(text):
    """Every command README.md quotes: the lines of its ``sh`` code blocks (comments cut) and
    the code spans of the first column of its tables that begin like a command."""
    found = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.M | re.S):
        found += [line.split("#")[0].strip() for line in block.splitlines()
                  if line.split("#")[0].strip()]
    for row in re.findall(r"^\|([^|\n]*)\|", text, flags=re.M):
        found += [span for span in re.findall(r"`([^`]+)`", row) if COMMAND_START.match(span)]
    return found


def as_run(command, out_dir):
    """``command`` split as a shell would, with ``.venv/bin/`` (or a bare ``spartan``) the
    running venv's and the argument of ``-o`` the temporary ``out_dir``."""
    argv = shlex.split(command)
    program = argv[0].removeprefix(".venv/bin/")
    if program != argv[0] or program == "spartan":
        argv[0] = str(VENV_BIN / program)
    return [str(out_dir) if i and argv[i - 1] == "-o" else a for i, a in enumerate(argv)]


def test_every_readme_command_is_run_or_skipped_with_a_reason():
    commands = readme_commands(README.read_text(encoding="utf-8"))
    assert set(RUN) <= set(commands), f"gone from README.md: {set(RUN) - set(commands)}"
    unclassified = [c for c in commands if c not in RUN and c not in SKIPPED]
    assert not unclassified, f"README.md commands neither run nor skipped: {unclassified}"
    assert not set(RUN) & set(SKIPPED)


@pytest.mark.parametrize("command", RUN)
def test_readme_command_runs_as_written(command, tmp_path):
    out_dir = tmp_path / "out"
    argv = as_run(command, out_dir)
    result = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, (command, result.stderr[-2000:])
    assert result.stdout.strip(), (command, "printed nothing")
    if "-o" in argv:
        assert any(out_dir.iterdir()), (command, "wrote nothing into -o")
