"""An import line leads to its file (issue #23): pyproject.toml's
``[tool.setuptools.package-dir]`` is the one key from an import name to a folder, and the
editable install is one IDEs and static analysers can follow.

* every package pyproject lists has its folder, and every folder of Python files under a mapped
  one is a listed package (else the wheel would lack it);
* every module of every mapped folder (recursively) imports under the mapped name from that
  folder's file: ``spartan_rtl.hw.gemm`` is hw/gemm/__init__.py, ``spartan_rtl.tb.axis`` is
  verif/tb/axis.py (checked in a fresh interpreter, from outside the tree and from its root);
* the editable install is strict (``make venv``): a tree of links in build/__editable__.*,
  which go-to-definition and analysers (pyright, jedi) follow to the real file, and no import
  hook (``__editable___*_finder`` in ``sys.meta_path``: the default mode, which they cannot
  see through). Skipped, saying why, for an installation made another way (a wheel, or
  ``pip install -e`` without ``--config-settings editable_mode=strict``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from verif.flows.mapping import (
    ROOT,
    mapped_modules,
    package_dirs,
    package_folder,
    setuptools_config,
)

DIRS = package_dirs()
PACKAGES = setuptools_config()["packages"]
LINK_TREES = "build/__editable__."
#: Imports the named modules, prints ``{name: __file__}``; a module that fails is reported.
IMPORT_ALL = """
import importlib, json, sys
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = importlib.import_module(name).__file__
    except Exception as e:
        found[name] = f"{type(e).__name__}: {e}"
print(json.dumps(found))
"""


def installation():
    """How the running interpreter has spartan-rtl: ``"none"``, ``"wheel"`` (copies),
    ``"other"`` (editable, from another checkout), ``"lenient"`` (editable through an import
    hook, pip's default) or ``"strict"`` (editable, a tree of links)."""
    # pip's record (a .dist-info with INSTALLER), not the tree's spartan_rtl.egg-info, which
    # setuptools leaves beside the sources and the tree's root on sys.path finds first.
    installed = [d for d in importlib.metadata.distributions(name="spartan-rtl")
                 if d.read_text("INSTALLER")]
    if not installed:
        return "none"
    direct_url = json.loads(installed[0].read_text("direct_url.json") or "{}")
    if not direct_url.get("dir_info", {}).get("editable"):
        return "wheel"
    if Path(direct_url.get("url", "").removeprefix("file://")).resolve() != ROOT:
        return "other"
    finders = [f for f in installed[0].files or ()
               if re.fullmatch(r"__editable___.*_finder\.py", f.name)]
    return "lenient" if finders else "strict"


SKIP_REASONS = {
    "none": "spartan-rtl is not installed (pip's record of it not found): make venv",
    "wheel": "spartan-rtl is installed from a wheel: its modules are copies in site-packages, "
             "not the tree's files (make venv installs the tree editable)",
    "other": "spartan-rtl is installed editable from another checkout, not this tree",
    "lenient": "spartan-rtl is installed editable in pip's default mode, through an import hook "
               "that IDEs and analysers cannot follow: `make venv` installs it in strict mode "
               "(rm .venv/.installed; make venv)",
}


def needs_this_tree_installed(strict=False):
    kind = installation()
    if kind in ("none", "wheel", "other") or (strict and kind == "lenient"):
        pytest.skip(SKIP_REASONS[kind])


def test_every_package_has_its_folder():
    missing = [p for p in PACKAGES if package_folder(p, DIRS) is None
               or not (ROOT / package_folder(p, DIRS)).is_dir()]
    assert not missing, f"packages of pyproject.toml without a folder: {missing}"
    assert set(DIRS) <= set(PACKAGES), "every mapped name is a package of [tool.setuptools]"
    unlisted = []
    for package, folder in DIRS.items():
        for name, path in mapped_modules(package, folder, DIRS):
            if path.name == "__init__.py" and name not in PACKAGES:
                unlisted.append(f"{name} ({path.parent.relative_to(ROOT)})")
    assert not unlisted, f"packages the wheel would lack (add them to packages): {unlisted}"


def import_files(names, cwd):
    result = subprocess.run([sys.executable, "-c", IMPORT_ALL, *names], cwd=cwd,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def modules(python):
    """``{module name: file}`` of every mapped folder: of its Python packages (``python``) or
    of its data folders (not ``python``: no ``__init__.py``, scripts such as
    ``fusesoc/spartan_gen.py``, which exits when imported)."""
    return {name: path for package, folder in DIRS.items()
            if (ROOT / folder / "__init__.py").is_file() == python
            for name, path in mapped_modules(package, folder, DIRS)}


@pytest.mark.parametrize("where", ["outside the tree", "the tree's root"])
def test_modules_import_from_their_folder(where, tmp_path):
    """Every module of every mapped Python package, imported under its mapped name in a fresh
    interpreter, is the folder's file: run from outside the tree (a user's code) and from its
    root (the tests and flows, with the tree's spartan_rtl/ first on sys.path)."""
    needs_this_tree_installed()
    expected = modules(python=True)
    assert {"spartan_rtl.hw.gemm", "spartan_rtl.tb.axis", "spartan_rtl.cli"} <= set(expected)
    found = import_files(sorted(expected), tmp_path if where.startswith("outside") else ROOT)
    wrong = {name: file for name, file in found.items()
             if Path(file).resolve() != expected[name]}
    assert not wrong, f"from {where}, not the mapped folder's file: {wrong}"


def test_data_folder_scripts_are_found_there():
    """The strict install links a data folder's files too (the default mode maps only the
    Python packages)."""
    needs_this_tree_installed(strict=True)
    expected = modules(python=False)
    assert "spartan_rtl.fusesoc.spartan_gen" in expected
    found = {name: importlib.util.find_spec(name).origin for name in expected}
    wrong = {n: f for n, f in found.items() if Path(f).resolve() != expected[n]}
    assert not wrong, f"not the mapped folder's file: {wrong}"


def test_editable_install_is_strict():
    """No import hook, and every mapped module's ``__file__`` (as an analyser finds it on
    sys.path) a link in the install's link tree to the folder's file."""
    needs_this_tree_installed(strict=True)
    hooks = [f for f in sys.meta_path if "__editable__" in getattr(f, "__module__", "")
             or "__editable__" in getattr(f, "__name__", "")]
    assert not hooks, f"an editable import hook is installed: {hooks}"
    trees = [Path(p) for p in sys.path if LINK_TREES in Path(p).as_posix()]
    assert len(trees) == 1 and trees[0].is_dir() and trees[0].parent == ROOT / "build", \
        f"sys.path holds no link tree {LINK_TREES}* of this tree: {trees}"
    for package, folder in DIRS.items():
        for name, path in mapped_modules(package, folder, DIRS):
            link = trees[0].joinpath(*name.split("."))
            link = link / "__init__.py" if path.name == "__init__.py" else link.with_suffix(".py")
            assert link.is_symlink() and link.resolve() == path, (name, link)


def test_makefile_installs_strict():
    """``make venv`` (and each extra's stamp) installs editable in strict mode, and reinstalls
    when the list of the mapped folders' Python files changes (strict links are made once)."""
    makefile = (ROOT / "Makefile").read_text()
    install = re.search(r"^INSTALL\s*:=(.*)$", makefile, re.M)
    assert install and "editable_mode=strict" in install.group(1) and " -e" in install.group(1)
    direct = re.findall(r"^\t.*pip install.*\s-e\s.*$", makefile, re.M)
    assert not direct, f"editable installs not through $(INSTALL) (strict): {direct}"
    assert re.search(r"^\t.*\$\(INSTALL\) '\.\[test\]'", makefile, re.M)
    assert re.search(r"^\$\(STAMP\):.*\$\(MODULES\)", makefile, re.M)
    assert "[tool.setuptools.package-dir]" in makefile.replace("\\", "")


def test_sim_build_hash_follows_imports_into_subpackages():
    """A simulation build is named by a hash of the ``hw`` sources its block imports
    (spartan_rtl/runner.py): a subpackage's modules count, so editing hw/gemm/parts.py rebuilds
    the GEMM, the core and the engine, and not the monitor."""
    from spartan_rtl import runner
    gemm = {"gemm", "gemm.broadcast", "gemm.parts", "gemm.replicated"}
    for block in ("gemm", "core", "engine"):
        assert gemm <= runner._hw_dependencies(block), block
    assert not gemm & runner._hw_dependencies("monitor")
    assert gemm | {"core", "emit"} <= runner._hw_modules()
    assert runner._hw_file("gemm") == runner.HW_DIR / "gemm" / "__init__.py"
