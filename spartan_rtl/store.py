"""The result store of ``spartan explore``, ``make synth`` and ``make mutants``
(docs/explore.md#the-store): one SQLite file, one row per job result, so that no job is computed
twice.

A row is keyed by what decides its result: the job *kind* (``cycles``, ``verilog``,
``netlist``, ``place``, ``asic``, ``mutant``), the *design* (for netlists, placements, the ASIC
proxy and mutant verdicts the SHA-256 of the Verilog; for the cycle model and the generator, of
the parameters and inputs they read), the *tools* that computed it (their versions, as
canonical JSON; for a verdict, the tests too), the *device* (a netlist's: the FPGA family) and
the placement or campaign *seed* (``""`` and 0 where they do not apply). The row holds the
result as JSON and a status: ``ok``, or ``failed`` with the reason.

Every write is its own transaction, so an interrupted sweep leaves whole rows only, and a key
is written once (a second result for it is dropped): a job that ran twice, because its worker
died after finishing, is still stored once.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Key", "Row", "Store", "digest", "source_digest", "checked_path", "DEFAULT_PATH"]

#: Where ``spartan explore``, ``make synth`` and ``make mutants`` keep their results unless
#: ``--store`` says otherwise.
DEFAULT_PATH = Path("build") / "explore.sqlite"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    kind    TEXT NOT NULL,
    design  TEXT NOT NULL,
    tools   TEXT NOT NULL,
    device  TEXT NOT NULL,
    seed    INTEGER NOT NULL,
    status  TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    reason  TEXT,
    result  TEXT,
    params  TEXT,
    seconds REAL,
    stored  REAL NOT NULL,
    PRIMARY KEY (kind, design, tools, device, seed)
)"""


def digest(value):
    """SHA-256 (hex) of ``value``: bytes and text as they are, anything else as canonical
    JSON (sorted keys), so equal parameter sets give equal digests."""
    if isinstance(value, str):
        value = value.encode()
    elif not isinstance(value, bytes):
        value = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(value).hexdigest()


def source_digest(package, names=None):
    """SHA-256 of the Python sources of a folder of this package (the cycle model, the
    generator), its subfolders' included: what a cached result computed by that code depends
    on. Each file is hashed with its path in the folder (its name, for a file at the top)."""
    folder = Path(__file__).resolve().parent / package
    if not folder.is_dir():    # the source tree of an editable install
        folder = Path(__file__).resolve().parent.parent / package
    files = (sorted(f for f in folder.rglob("*.py") if "__pycache__" not in f.parts)
             if names is None else [folder / n for n in names])
    return digest(b"".join(f.relative_to(folder).as_posix().encode() + f.read_bytes()
                           for f in files))


def checked_path(path, option="--store"):
    """The store's path (``None``: :data:`DEFAULT_PATH`): a new file, or an SQLite file, else a
    UsageError naming ``option``; nothing else is overwritten, nothing is written."""
    from .usage import UsageError, check_output_file
    path = Path(path) if path is not None else DEFAULT_PATH
    check_output_file(path, option, new_folders=True)
    if path.is_file() and path.stat().st_size:
        with open(path, "rb") as f:
            if f.read(16) != b"SQLite format 3\0":
                raise UsageError(f"{option} must be an SQLite file or a new path, not "
                                 f"{str(path)!r}")
    return path


@dataclass(frozen=True)
class Key:
    """What a result depends on; ``tools`` a mapping of tool -> version."""

    kind: str
    design: str
    tools: tuple = ()
    device: str = ""
    seed: int = 0

    @classmethod
    def of(cls, kind, design, tools=None, device="", seed=0):
        return cls(kind, design, tuple(sorted((tools or {}).items())), device, int(seed))

    def columns(self):
        tools = json.dumps(dict(self.tools), sort_keys=True, separators=(",", ":"))
        return (self.kind, self.design, tools, self.device, self.seed)


@dataclass(frozen=True)
class Row:
    key: Key
    status: str          # "ok" or "failed"
    result: object       # the job's JSON result (None if it failed)
    reason: str | None   # why it failed
    params: object       # what the job was asked, for a reader of the store
    seconds: float | None

    @property
    def ok(self):
        return self.status == "ok"


class Store:
    """``Store(path)``: the results in the SQLite file ``path``, created (with its folder) on
    first use. Safe to share between processes: SQLite locks the file."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)

    def get(self, key):
        """The row stored under ``key``, or None."""
        found = self._db.execute(
            "SELECT status, result, reason, params, seconds FROM results WHERE kind=? AND "
            "design=? AND tools=? AND device=? AND seed=?", key.columns()).fetchone()
        if found is None:
            return None
        status, result, reason, params, seconds = found
        return Row(key, status, json.loads(result) if result is not None else None, reason,
                   json.loads(params) if params is not None else None, seconds)

    def put(self, key, *, result=None, reason=None, params=None, seconds=None):
        """Store a result (``reason`` None) or a failure (``reason`` given) under ``key``, in
        one transaction; False, and nothing changed, if ``key`` already has a row."""
        status = "ok" if reason is None else "failed"
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO results (kind, design, tools, device, seed, status, reason, "
            "result, params, seconds, stored) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (*key.columns(), status, reason,
             # The result as the job gave it (its keys in its order: reports read them back).
             json.dumps(result) if reason is None else None,
             json.dumps(params, sort_keys=True), seconds, time.time()))
        return cursor.rowcount == 1

    def forget_failed(self, key):
        """Drop ``key``'s row if it is a failure (``--retry-failed``); True if one was."""
        return self._db.execute(
            "DELETE FROM results WHERE kind=? AND design=? AND tools=? AND device=? AND seed=? "
            "AND status='failed'", key.columns()).rowcount == 1

    def count(self, kind=None):
        """Rows stored (of one kind)."""
        if kind is None:
            return self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        return self._db.execute("SELECT COUNT(*) FROM results WHERE kind=?",
                                (kind,)).fetchone()[0]

    def close(self):
        self._db.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
