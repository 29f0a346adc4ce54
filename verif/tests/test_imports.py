"""The import contracts of ``make lint`` (verif/flows/imports.py): the view of the tree that
import-linter reads is laid out as Python imports it, and the contracts hold."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from verif.flows import ROOT, imports


def test_package_folders_follow_pyproject():
    folders = imports.package_folders(ROOT / "pyproject.toml")
    assert folders["spartan_rtl.hw"] == Path("hw")
    assert folders["spartan_rtl.tb"] == Path("verif/tb")
    assert folders["verif"] == Path("verif")
    # data folders are no Python packages
    assert "spartan_rtl.traces" not in folders


def test_view_places_each_module_once(tmp_path):
    view = imports.build_view(imports.package_folders(ROOT / "pyproject.toml"), tmp_path / "v")
    assert (view / "spartan_rtl" / "hw" / "core.py").resolve() == ROOT / "hw" / "core.py"
    assert (view / "spartan_rtl" / "tb" / "profile.py").resolve() == ROOT / "verif/tb/profile.py"
    assert (view / "verif" / "tests" / "test_imports.py").exists()
    # verif/tb is spartan_rtl.tb, not also verif.tb
    assert not (view / "verif" / "tb").exists()


@pytest.mark.skipif(shutil.which("lint-imports", path=str(Path(sys.executable).parent)) is None,
                    reason="import-linter is not installed (the 'test' extra)")
def test_contracts_hold(tmp_path):
    assert imports.main(["--no-logo"], view=tmp_path / "view") == 0
