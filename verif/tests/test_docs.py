"""Every reference the documentation makes resolves, and the interface contract is the one in
the repository.

* every ``make TARGET`` quoted in README.md or docs/*.md (code spans and code blocks) is a
  target of the Makefile;
* every repository path they name (``hw/...``, ``docs/...``, ...), every ``python -m MODULE``
  and dotted module (``spartan_rtl.tb.axis.check_sequence``), every relative Markdown link and every
  ``#anchor`` of one exists;
* no file cites ``SPEC.md``, the contract the project started from, which is not in the
  repository: docs/interfaces.md is the contract, with its deviations from SPEC.md listed.

No simulator, no elaboration: text only, well under a second.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = sorted(p for folder in ("hw", "golden", "verif", "sw", "fusesoc")
                 for p in (ROOT / folder).iterdir()
                 if p.suffix in (".py", ".cpp", ".c", ".h", ".core", ".vlt"))
CONTRACT = "docs/interfaces.md"
#: This file names the patterns it looks for.
SELF = Path(__file__).resolve()

#: Files that were being rewritten by others when the contract moved into docs/interfaces.md
#: (issue #15, item 6) and so still cite ``SPEC §N``. Tighten: remove a name as soon as its
#: file is clean (``test_spec_exceptions_are_needed`` says when).
SPEC_EXCEPTIONS = frozenset()

# "SPEC.md", "SPEC §4.5", "SPEC 4.2", "the SPEC": a citation of the old contract. Names that
# merely contain the word (SPEC_COUNTERS) are not citations.
SPEC_CITATION = re.compile(r"\bSPEC(?:\.md\b|\s*§|\s+\d)|\bthe SPEC\b")
PACKAGES = ("spartan_rtl", "verif")
TOP_FOLDERS = ("hw", "golden", "verif", "docs", "sw", "fusesoc", "data")
REPO_PATH = re.compile(r"(?<![\w/.<>$-])((?:%s)/[\w./-]*)" % "|".join(TOP_FOLDERS))
# Characters after which a path is a pattern (`verif/tb/tb_<block>.py`, `docs/img/*.png`), not a file.
PATTERN_CONTINUES = set("<*{$")
DOTTED_MODULE = re.compile(r"(?<![\w./-])((?:spartan_rtl|verif)(?:\.[a-z_]\w*)+)")
#: Where the installed namespace's packages live in the tree (pyproject.toml).
PACKAGE_DIRS = {"spartan_rtl.hw": "hw", "spartan_rtl.golden": "golden",
                "spartan_rtl.tb": "verif/tb", "spartan_rtl.sw": "sw", "spartan_rtl": "spartan_rtl",
                "verif": "verif"}
PYTHON_M = re.compile(r"python3? -m ([\w.]+)")
MAKE_CALL = re.compile(r"(?:^|[\s;&|(`])make\s+(?:[A-Z_]+=\S*\s+)*([a-z][\w-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ANCHORED_DOC = re.compile(r"\b(docs/[\w.-]+\.md)#([\w-]+)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def rel(path):
    return path.relative_to(ROOT).as_posix()


def code_text(text):
    """The code blocks and code spans of a Markdown text: where commands are quoted."""
    blocks = FENCE.findall(text)
    spans = CODE_SPAN.findall(FENCE.sub("", text))
    return blocks + spans


def makefile_targets():
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([A-Za-z][\w.\- ]*?)\s*:(?!=)", line)
        if match and not line.startswith("\t"):
            targets.update(match.group(1).split())
    return targets


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.strip().lower()
    kept = "".join(c for c in text
                   if c in " -_" or unicodedata.category(c)[0] in "LN")
    return kept.replace(" ", "-")


def anchors(markdown_path):
    text = FENCE.sub("", markdown_path.read_text())
    seen, out = {}, set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def test_slug_follows_github():
    assert slug("`spartan generate`, `spartan list`: the command line contract") == \
        "spartan-generate-spartan-list-the-command-line-contract"
    assert slug("Deviations from SPEC.md") == "deviations-from-specmd"
    assert slug("4.2 `compactor` — dense→ZVC") == "42-compactor--densezvc"


def test_checks_catch_broken_references():
    """Each check finds what it is for in a made-up page (so none of them passes vacuously)."""
    page = ("`make nosuch`, `SIM=icarus make test`, `hw/nothere.py`, `verif/tb/tb_<block>.py`, "
            "[a](docs/none.md), `spartan_rtl.tb.axis.check_sequence`, `verif.nomod.f`, data/cycle\n"
            "```\nmake rtl\n```\n")
    assert [t for code in code_text(page) for t in MAKE_CALL.findall(code)] == \
        ["rtl", "nosuch", "test"]
    assert list(cited_paths(page)) == ["hw/nothere.py", "docs/none.md"]
    assert module_exists("spartan_rtl.tb.axis.check_sequence") and not module_exists("verif.nomod.f")
    assert module_exists("spartan_rtl.hw.ip") and not module_exists("spartan_rtl.hw.nothere")
    assert all(SPEC_CITATION.search(t) for t in ("SPEC §4.1", "SPEC.md", "SPEC 4.2", "the SPEC"))
    assert not SPEC_CITATION.search("SPEC_COUNTERS = (...)")


def test_makefile_targets_are_parsed():
    assert {"rtl", "test", "lint", "clean", "docs-registers"} <= makefile_targets()
    assert "SHELL" not in makefile_targets() and "PYTHON" not in makefile_targets()


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_make_targets_exist(doc):
    targets = makefile_targets()
    cited = {t for code in code_text(doc.read_text()) for t in MAKE_CALL.findall(code)}
    missing = sorted(cited - targets)
    assert not missing, f"{rel(doc)} cites make targets the Makefile lacks: {missing}"


def cited_paths(text):
    for match in REPO_PATH.finditer(text):
        path = match.group(1).rstrip(".-")
        following = text[match.end():match.end() + 1]
        if following in PATTERN_CONTINUES:
            continue
        # A file has an extension, a folder a trailing slash; "data/cycle" is a column header.
        if path.endswith("/") or "." in path.rsplit("/", 1)[-1]:
            yield path


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_cited_paths_exist(doc):
    text = doc.read_text()
    missing = sorted({p for p in cited_paths(text) if not (ROOT / p).exists()})
    missing += sorted({m for m in PYTHON_M.findall(text)
                       if m.split(".")[0] in PACKAGES and not module_exists(m)})
    missing += sorted({name for code in code_text(text) for name in DOTTED_MODULE.findall(code)
                       if not module_exists(name)})
    assert not missing, f"{rel(doc)} names files or modules that do not exist: {missing}"


def module_exists(dotted):
    """A dotted name of the repository's packages (``spartan_rtl.hw.ip.IO_DELAY_FRACTION``): its longest
    module prefix, at least ``package.module``, is a file or package; the rest are names in it."""
    package = max((p for p in PACKAGE_DIRS if dotted == p or dotted.startswith(p + ".")),
                  key=len, default=None)
    if package is None:
        return False
    parts = [PACKAGE_DIRS[package]] + dotted[len(package) + 1:].split(".")
    if parts[1:] == [""]:
        return (ROOT / parts[0] / "__init__.py").is_file()
    for end in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    return False


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_links_and_anchors_resolve(doc):
    broken = []
    text = FENCE.sub("", doc.read_text())
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        resolved = (doc.parent / path).resolve() if path else doc
        if not resolved.exists():
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert not broken, f"{rel(doc)} has links that lead nowhere: {broken}"


@pytest.mark.parametrize("source", DOCS + SOURCES, ids=rel)
def test_contract_anchors_exist(source):
    """``docs/<page>.md#anchor`` in prose, docstrings and comments names a real heading."""
    broken = [f"{page}#{anchor}" for page, anchor in ANCHORED_DOC.findall(source.read_text())
              if not (ROOT / page).is_file() or anchor not in anchors(ROOT / page)]
    assert not broken, f"{rel(source)} points to missing sections: {broken}"


@pytest.mark.parametrize("source", DOCS + SOURCES, ids=rel)
def test_module_references_exist(source):
    """A ``:mod:`` role in a docstring names a module of the repository."""
    missing = [m for m in re.findall(r":mod:`~?([\w.]+)`", source.read_text())
               if m.split(".")[0] in PACKAGES and not module_exists(m)]
    assert not missing, f"{rel(source)} names modules that do not exist: {missing}"


def spec_citations(path):
    return [f"{rel(path)}:{n}: {line.strip()}"
            for n, line in enumerate(path.read_text().splitlines(), 1)
            if SPEC_CITATION.search(line)]


def test_no_spec_citations():
    """The contract is docs/interfaces.md; only its deviations section names SPEC.md."""
    found = []
    for path in DOCS + SOURCES + [ROOT / "Makefile", ROOT / "pyproject.toml"]:
        if rel(path) in SPEC_EXCEPTIONS or path == SELF:
            continue
        if rel(path) == CONTRACT:
            found += [c for c in spec_citations(path) if "§" in c]
            continue
        found += spec_citations(path)
    assert not found, ("cite docs/interfaces.md (with a section anchor), not SPEC:\n"
                       + "\n".join(found))


def test_spec_exceptions_are_needed():
    clean = sorted(name for name in SPEC_EXCEPTIONS
                   if not (ROOT / name).exists() or not spec_citations(ROOT / name))
    assert not clean, f"no SPEC citation left in {clean}: remove them from SPEC_EXCEPTIONS"


def test_contract_states_its_deviations():
    assert "deviations-from-specmd" in anchors(ROOT / CONTRACT)
