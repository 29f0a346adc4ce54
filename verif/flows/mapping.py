"""The installed namespace's map of the source tree, read from its single key: pyproject.toml's
``[tool.setuptools.package-dir]`` (import name -> folder: ``spartan_rtl.hw`` is ``hw/``,
``spartan_rtl.tb`` is ``verif/tb/``, ...). For the tests that check the tree against it:
test_docs.py (every folder it scans, every dotted name it resolves), test_layout.py (every
module imports from its folder's file) and verif/flows/imports.py (the tree laid out as it is
imported, for import-linter)."""

from __future__ import annotations

from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: pytest's own dependency provides it
    import tomli as tomllib

from verif.flows import ROOT

PYPROJECT = ROOT / "pyproject.toml"


def setuptools_config():
    """``[tool.setuptools]`` of pyproject.toml: ``packages``, ``package-dir``, ..."""
    return tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]


def package_dirs():
    """Every entry of ``[tool.setuptools.package-dir]``: import name -> folder (POSIX, relative
    to the repository root)."""
    return dict(setuptools_config()["package-dir"])


def package_folder(package, dirs=None):
    """The folder of ``package`` as setuptools places it: the entry of the longest mapped prefix,
    then one folder per further name (``spartan_rtl.hw.gemm`` -> ``hw/gemm``); ``None`` when no
    prefix is mapped."""
    dirs = package_dirs() if dirs is None else dirs
    prefix = max((p for p in dirs if package == p or package.startswith(p + ".")),
                 key=len, default=None)
    if prefix is None:
        return None
    rest = package[len(prefix) + 1:].split(".") if package != prefix else []
    return Path(dirs[prefix]).joinpath(*rest).as_posix()


def mapped_modules(package, folder, dirs=None):
    """``(module name, file)`` of every Python file under ``folder`` (recursively) as imported
    under ``package``; subfolders that another entry maps are that entry's."""
    dirs = package_dirs() if dirs is None else dirs
    others = {(ROOT / f).resolve() for p, f in dirs.items() if p != package}
    base = ROOT / folder
    for path in sorted(base.rglob("*.py")):
        parents = path.relative_to(base).parents
        if "__pycache__" in path.parts or any((base / p).resolve() in others
                                               for p in parents if p != Path(".")):
            continue
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join([package, *parts]), path
