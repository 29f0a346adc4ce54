"""``make lint``: the import-linter contracts of pyproject.toml (``[tool.importlinter]``: the
product never imports the tests or flows, the hardware imports no tool, no import cycles).

import-linter finds a package's modules in the folder Python would import it from, but the
installed namespace maps several folders into ``spartan_rtl`` (pyproject's ``package-dir``:
``hw/`` is ``spartan_rtl.hw``, ``verif/tb/`` is ``spartan_rtl.tb``, ...), which the editable
install resolves at import time only. So this flow lays the tree out as it is imported, a
folder of symbolic links per package (build/import-view/), read from pyproject's mapping, and
runs ``lint-imports`` there. ``python -m verif.flows.imports``; exits as ``lint-imports`` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from verif.flows.mapping import ROOT, package_folder, tomllib

VIEW = ROOT / "build" / "import-view"


def package_folders(pyproject):
    """Every Python package the contracts cover -> its folder in the tree: the installed ones
    of ``[tool.setuptools]`` (``packages``, placed as setuptools does: :mod:`verif.flows.mapping`)
    and the root packages of ``[tool.importlinter]`` that are not installed (``verif``). Data
    packages without ``__init__.py`` are left out."""
    config = tomllib.loads(pyproject.read_text())["tool"]
    dirs = config["setuptools"].get("package-dir", {})
    folders = {package: Path(package_folder(package, dirs) or Path(*package.split(".")))
               for package in config["setuptools"]["packages"]}
    for package in config["importlinter"]["root_packages"]:
        folders.setdefault(package, Path(*package.split(".")))
    return {package: folder for package, folder in folders.items()
            if (ROOT / folder / "__init__.py").is_file()}


def build_view(folders, view):
    """``view/<package as a path>/`` for each package: links to its folder's files and
    subfolders, but for the subfolders that are packages placed elsewhere (``verif/tb`` is
    ``spartan_rtl/tb`` there, not ``verif/tb``)."""
    shutil.rmtree(view, ignore_errors=True)
    placed = {(ROOT / folder).resolve() for folder in folders.values()}
    for package, folder in folders.items():
        target = view.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for entry in sorted((ROOT / folder).iterdir()):
            if entry.name == "__pycache__" or (entry.is_dir() and entry.resolve() in placed):
                continue
            (target / entry.name).symlink_to(entry.resolve())
    return view


def main(argv=None, view=VIEW):
    argv = sys.argv[1:] if argv is None else argv
    pyproject = ROOT / "pyproject.toml"
    view = build_view(package_folders(pyproject), view)
    # lint-imports puts its working folder first on sys.path: the view's packages, not the
    # editable install's, are the ones it reads.
    lint_imports = Path(sys.executable).parent / "lint-imports"
    command = [str(lint_imports) if lint_imports.exists() else "lint-imports", "--no-cache",
               str(pyproject), *argv]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(command, cwd=view, env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
