"""Every reference the documentation makes resolves, and the interface contract is the one in
the repository.

* every ``make TARGET`` quoted in README.md, docs/*.md or another README of the tree (code
  spans and code blocks) is a target of the Makefile;
* every repository path they name (``hw/...``, ``docs/...``, ...), every ``python -m MODULE``
  and dotted module (``spartan_rtl.tb.axis.check_sequence``), every relative Markdown link and every
  ``#anchor`` of one exists;
* the same for the sources: every file of every folder pyproject's
  ``[tool.setuptools.package-dir]`` maps into ``spartan_rtl`` (read from there, recursively), of
  ``verif/`` (tests, flows) and ``docs/examples/``, the Makefile and pyproject.toml (a Python
  file's comments and docstrings, any other file whole): the paths, dotted modules,
  ``docs/<page>.md#anchor`` and ``:mod:`` roles they cite exist; a dotted name resolves through
  that mapping (``spartan_rtl.tb.axis`` is ``verif/tb/axis.py``), a path is a file path
  (``spartan_rtl/tb/axis.py`` is not one);
* a section cited by name (``docs/gemm.md, "Cycle model"``, ``section "Cycle model"`` in the
  page itself) is a heading of that page or a paragraph's bold lead;
* README.md's Layout table is pyproject's mapping, and docs/architecture.md's module map names
  every module of the mapped folders and of verif/flows;
* no file cites ``SPEC.md``, the contract the project started from, which is not in the
  repository: docs/interfaces.md is the contract, with its deviations from SPEC.md listed.

No simulator, no elaboration: text only, a few seconds.
"""

from __future__ import annotations

import io
import re
import tokenize
import unicodedata
from pathlib import Path

import pytest

from verif.flows.mapping import ROOT, package_dirs

#: Where the installed namespace's packages live in the tree (pyproject.toml), and ``verif``
#: (not installed: imported from the repository root).
PACKAGE_DIRS = {**package_dirs(), "verif": "verif"}
#: The folders whose files are checked: every mapped one, the tests and flows, the examples.
SOURCE_FOLDERS = sorted({*PACKAGE_DIRS.values(), "docs/examples"})
SOURCE_SUFFIXES = (".py", ".cpp", ".c", ".h", ".core", ".vlt", ".v")
#: Third-party files kept unmodified (their licence says so): not ours to fix.
VENDORED = ("verif/schemas/ipxact-1685-2014",)


def _tree_files(suffixes):
    found = set()
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            relative = path.relative_to(ROOT).as_posix()
            if (path.suffix in suffixes and path.is_file() and "__pycache__" not in path.parts
                    and not relative.startswith(VENDORED)):
                found.add(path)
    return sorted(found)


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")),
        *(p for p in _tree_files((".md",)) if p.parent != ROOT / "docs"),
        ROOT / "rtl_out" / "README.md"]  # (the other rtl_out/*.md are generated, not kept)
SOURCES = _tree_files(SOURCE_SUFFIXES) + [ROOT / "Makefile", ROOT / "pyproject.toml"]
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
TOP_FOLDERS = ("hw", "golden", "verif", "docs", "sw", "fusesoc", "data", "spartan_rtl")
REPO_PATH = re.compile(r"(?<![\w/.<>$-])((?:%s)/[\w./-]*)" % "|".join(TOP_FOLDERS))
# Characters after which a path is a pattern (`verif/tb/tb_<block>.py`, `docs/img/*.png`), not a
# file.
PATTERN_CONTINUES = set("<*{$")
DOTTED_MODULE = re.compile(r"(?<![\w./-])((?:spartan_rtl|verif)(?:\.[a-z_]\w*)+)")
PYTHON_M = re.compile(r"python3? -m ([\w.]+)")
MAKE_CALL = re.compile(r"(?:^|[\s;&|(`])make\s+(?:[A-Z_]+=\S*\s+)*([a-z][\w-]*)")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
ANCHORED_DOC = re.compile(r"\b(docs/[\w.-]+\.md)#([\w-]+)")
# A section cited by name: `docs/gemm.md, "Cycle model"`, `docs/core.md, *Reset*` (the comment
# may wrap between the two), and in a page about itself `section "X"`, `see "X"`, `"X" above`.
NAMED_SECTION = re.compile(r'\b(docs/[\w.-]+\.md),?\s*(?:(?:#:?|//)\s*)?(?:section\s+)?'
                           r'(?:"([A-Za-z`][^"\n]*)"|\*([A-Za-z`][^*\n]*)\*)')
OWN_SECTION = re.compile(r'\b(?:section|see)\s+"([A-Za-z`][^"\n]*)"'
                         r'|"([A-Za-z`][^"\n]*)"\s+(?:above|below)\b')
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


def section_names(markdown_path):
    """What a page's sections are cited by: its headings and the bold leads of its paragraphs
    and list items (``**The multipliers (`multiplier`).**``), lower case, without markup."""
    text = FENCE.sub("", markdown_path.read_text())
    names = re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M)
    names += re.findall(r"^(?:[*-]\s+)?\*\*(.+?)\*\*", text, re.M)
    return [re.sub(r"\s+", " ", name.replace("`", "")).lower() for name in names]


def names_a_section(name, markdown_path):
    wanted = re.escape(re.sub(r"\s+", " ", name.replace("`", "")).lower().strip(" ."))
    return any(re.search(rf"(?<!\w){wanted}(?!\w)", section)
               for section in section_names(markdown_path))


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
    assert module_exists("spartan_rtl.tb.axis.check_sequence")
    assert not module_exists("verif.nomod.f")
    assert module_exists("spartan_rtl.hw.ip") and not module_exists("spartan_rtl.hw.nothere")
    assert all(SPEC_CITATION.search(t) for t in ("SPEC §4.1", "SPEC.md", "SPEC 4.2", "the SPEC"))
    assert list(cited_paths("`spartan_rtl/tb/axis.py`")) == ["spartan_rtl/tb/axis.py"]
    assert module_exists("spartan_rtl.fusesoc") and not module_exists("spartan_rtl.fusesoc.no")
    assert module_exists("spartan_rtl.shipped") and not module_exists("spartan_rtl.nothere")
    assert path_exists("spartan_rtl/fusesoc/spartan_gen.py") and path_exists("verif/tb/axis.py")
    assert not path_exists("spartan_rtl/tb/axis.py")
    named = "``spartan_rtl.tb.tb_<block>``, spartan_rtl.hw.ip., spartan_rtl.egg-info"
    assert list(dotted_names(named)) == ["spartan_rtl.hw.ip"]
    cited = 'docs/gemm.md, "Cycle model"; docs/gemm.md, *No such part*; section "Cycle model"'
    assert [m[1] or m[2] for m in NAMED_SECTION.findall(cited)] == ["Cycle model", "No such part"]
    assert [m[0] for m in OWN_SECTION.findall(cited)] == ["Cycle model"]
    gemm = ROOT / "docs" / "gemm.md"
    assert names_a_section("Cycle model", gemm) and not names_a_section("No such part", gemm)
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


def path_exists(path):
    """A path of the tree, or the wheel's place of a file of a data package (no
    ``__init__.py``: found by path, ``spartan_rtl/fusesoc/``, not imported)."""
    if (ROOT / path).exists():
        return True
    head, _, rest = path.partition("/")
    package, _, rest = rest.partition("/")
    folder = PACKAGE_DIRS.get(f"{head}.{package}")
    return (head == "spartan_rtl" and folder is not None
            and not (ROOT / folder / "__init__.py").exists() and (ROOT / folder / rest).exists())


@pytest.mark.parametrize("doc", DOCS, ids=rel)
def test_cited_paths_exist(doc):
    text = doc.read_text()
    missing = sorted({p for p in cited_paths(text) if not path_exists(p)})
    missing += sorted({m for m in PYTHON_M.findall(text)
                       if m.split(".")[0] in PACKAGES and not module_exists(m)})
    missing += sorted({name for code in code_text(text) for name in dotted_names(code)
                       if not module_exists(name)})
    assert not missing, f"{rel(doc)} names files or modules that do not exist: {missing}"


def module_exists(dotted):
    """A dotted name of the repository's packages (``spartan_rtl.hw.ip.IO_DELAY_FRACTION``): its
    longest module prefix, at least ``package.module``, is a file or package (found through
    pyproject's mapping); the rest are names in it."""
    package = max((p for p in PACKAGE_DIRS if dotted == p or dotted.startswith(p + ".")),
                  key=len, default=None)
    if package is None:
        return False
    parts = [PACKAGE_DIRS[package]] + dotted[len(package) + 1:].split(".")
    if parts[1:] == [""]:  # a package itself; a data package (fusesoc) has no __init__.py
        return (ROOT / parts[0]).is_dir()
    for end in range(len(parts), 1, -1):
        base = ROOT.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file() or (base / "__init__.py").is_file():
            return True
    # A name of the package itself (``spartan_rtl.shipped``, ``spartan_rtl.tb.__path__``).
    init, name = ROOT / parts[0] / "__init__.py", parts[1]
    return init.is_file() and (re.fullmatch(r"__\w+__", name) is not None or re.search(
        rf"^(?:def|class)\s+{name}\b|^{name}\s*[:=]", init.read_text(), re.M) is not None)


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


def prose(source):
    """What a source file says to its reader: a Python file's comments and docstrings (not its
    code's strings, which may name made-up files on purpose, or a wheel's paths); all of any
    other file (C, Verilog, FuseSoC, Makefile, TOML: mostly comments)."""
    text = source.read_text()
    if source.suffix != ".py":
        return text
    said, previous = [], tokenize.NEWLINE
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT or (
                token.type == tokenize.STRING and previous in STATEMENT_START):
            said.append(token.string)
        if token.type not in (tokenize.NL, tokenize.COMMENT):
            previous = token.type
    return "\n".join(said)


STATEMENT_START = (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING)


def dotted_names(text):
    """The dotted names of the repository's packages in ``text``, but for patterns
    (``spartan_rtl.tb.tb_<block>``)."""
    for match in DOTTED_MODULE.finditer(text):
        if text[match.end():match.end() + 1] not in PATTERN_CONTINUES | {"-"}:
            yield match.group(1).rstrip(".")


@pytest.mark.parametrize("source", SOURCES, ids=rel)
def test_source_paths_exist(source):
    """The files and dotted modules a source's comments and docstrings name exist; a path
    under ``spartan_rtl/`` is a file of that folder (``spartan_rtl/tb/axis.py`` is not: the
    file is verif/tb/axis.py, imported as ``spartan_rtl.tb.axis``), or a data file's place in
    the wheel (``spartan_rtl/fusesoc/spartan_gen.py``)."""
    if source == SELF:
        pytest.skip("names made-up paths to show the checks find them")
    text = prose(source)
    missing = sorted({p for p in cited_paths(text) if not path_exists(p)})
    missing += sorted({name for name in dotted_names(text) if not module_exists(name)})
    assert not missing, f"{rel(source)} names files or modules that do not exist: {missing}"


@pytest.mark.parametrize("source", DOCS + SOURCES, ids=rel)
def test_named_sections_exist(source):
    """A section cited by name is a heading (or a bold paragraph lead) of the page it names."""
    if source == SELF:
        pytest.skip("cites a made-up section to show the check finds it")
    text = source.read_text()
    cited = [(page, a or b) for page, a, b in NAMED_SECTION.findall(text)]
    if source in DOCS:
        cited += [(rel(source), a or b) for a, b in OWN_SECTION.findall(FENCE.sub("", text))]
    broken = [f"{page}, {name!r}" for page, name in cited
              if not (ROOT / page).is_file() or not names_a_section(name, ROOT / page)]
    assert not broken, f"{rel(source)} cites sections its pages lack: {broken}"


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
    for path in DOCS + SOURCES:
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


def test_readme_layout_is_the_mapping():
    """README.md's Layout table (import name, folder) is ``[tool.setuptools.package-dir]``."""
    layout = (ROOT / "README.md").read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    table = dict(re.findall(r"^\| `(spartan_rtl[\w.]*)` \| `([\w/]+?)/?` \|", layout, re.M))
    assert table == package_dirs()


def test_module_map_names_every_module():
    """docs/architecture.md's "Modules" names every module of the mapped Python folders and of
    verif/flows, their subpackages' included, by its path in a code span (``hw/core.py``), or
    a pattern (``verif/tb/tb_<block>.py``); a subpackage's ``__init__.py`` also by its folder
    (``verif/flows/synth/``)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    spans = set(code_text(text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]))
    spans |= {f"{s}__init__.py" for s in spans if s.endswith("/")}
    patterns = [re.compile(re.sub(r"\\<\w+\\>|<\w+>", r"\\w+", re.escape(s)) + "$")
                for s in spans if "<" in s]
    folders = [f for f in PACKAGE_DIRS.values() if f != "verif"] + ["verif/flows"]
    modules = sorted({rel(p) for f in folders if (ROOT / f / "__init__.py").is_file()
                      for p in (ROOT / f).rglob("*.py")
                      if "__pycache__" not in p.parts and p != ROOT / f / "__init__.py"})
    unnamed = [m for m in modules if m not in spans and not any(r.match(m) for r in patterns)]
    assert not unnamed, f"docs/architecture.md's module map lacks: {unnamed}"


def test_contract_states_its_deviations():
    assert "deviations-from-specmd" in anchors(ROOT / CONTRACT)
