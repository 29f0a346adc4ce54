"""Spartan RTL: a generator of the Spartan sparse DNN-training hardware, and its user tools.

One installed namespace. The folders of the source tree map into it (pyproject.toml's
``[tool.setuptools.package-dir]``, the one key from an import name to its folder):

- ``spartan_rtl.hw``: ``hw/``, the Amaranth blocks and the emitters of Verilog and IP files;
- ``spartan_rtl.golden``: ``golden/``, the NumPy reference and cycle models;
- ``spartan_rtl.tb``: ``verif/tb/``, the cocotb testbenches, benchmarks and their stream library,
  which ``spartan sim`` and ``spartan bench`` run;
- ``spartan_rtl.sw``: ``sw/``, the C drivers ``spartan generate core|engine`` writes;
- data, found with :func:`shipped`: ``spartan_rtl/fusesoc`` (``fusesoc/``, the FuseSoC
  generator script and library core) and ``spartan_rtl/traces`` (the sample activation trace
  ``data/traces/digits_cnn_epoch15.npz``, which ``spartan bench estimate`` reads);
- this folder: the ``spartan`` command and the user tools it calls (simulation runner,
  waveform reader and renderer, benchmark driver).

The pytest tests (``verif/tests/``) and developer flows (``verif/flows/``) are not installed.
"""

__version__ = "0.1.0"

# Run from the repository root, this folder comes first on sys.path ('' or pytest's rootdir),
# ahead of the editable install's tree of links (build/__editable__.*, strict mode) that holds
# the whole namespace: every other spartan_rtl folder on sys.path joins this package's path, so
# spartan_rtl.hw and the rest are found there. Elsewhere (a wheel, used outside the tree) there
# is no other such folder, and nothing changes.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

#: Data folders of the wheel (inside this package) -> where the source tree keeps them.
SOURCE_FOLDERS = {"fusesoc": "fusesoc", "traces": "data/traces"}


def shipped(folder):
    """The path of a data folder of :data:`SOURCE_FOLDERS`: inside the installed package, or,
    from an editable install (this file resolves into the source tree), the tree's."""
    from pathlib import Path
    here = Path(__file__).resolve().parent
    installed, source = here / folder, here.parent / SOURCE_FOLDERS[folder]
    return installed if installed.is_dir() or not source.is_dir() else source
