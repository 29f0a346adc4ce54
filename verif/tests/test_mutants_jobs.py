"""``make mutants`` on the executor and the store (issue 25): every evaluation (the clean
design's and each mutant's) submitted through spartan_rtl/jobs.py, its verdict stored under
(``mutant``, the Verilog's SHA-256, the tests, ``""``, the seed), a rerun that evaluates nothing
and writes the same reports, a failing evaluation stored with its reason while the campaign
goes on, ``--rerun-survivors`` after tests were added, and the command line's scheduler and
store. The evaluation is a stub (no Verilator, no cocotb) run by a Dask cluster of 2 worker
threads in this process, so that the stub is the one the workers call: seconds."""

from __future__ import annotations

import hashlib
import json
import threading
import types

import pytest

pytest.importorskip("distributed")

from spartan_rtl.store import Store  # noqa: E402
from verif.flows import mutants  # noqa: E402
from verif.tests.helpers import YOSYS_STYLE_MODULE as SAMPLE  # noqa: E402
from verif.tests.helpers import store_rows  # noqa: E402

BLOCK = "monitor"   # a real block: the tools part of the key names it
COUNT, SEED = 6, 3
CHOSEN = mutants.select(SAMPLE, COUNT, SEED, BLOCK)
TEXTS = [m.apply(SAMPLE) for m in CHOSEN]
#: Seconds each stub evaluation takes on the flow's clock: what the report's wall time shows.
EVALUATION_S = 60


class FakeEvaluation:
    """:func:`mutants._evaluate` replaced: each call noted as ``(text's index or "clean",
    directory's name, test time-out)``; the clean design passes, the mutants ``survive`` (their
    indices) survive, the others are killed, and the ``fail`` ones raise. Each call advances
    the flow's clock by :data:`EVALUATION_S`."""

    def __init__(self):
        self.calls, self.survive, self.fail, self.now = [], {1, 4}, {}, 0.0
        self.lock = threading.Lock()

    def monotonic(self):
        return self.now

    def __call__(self, block_name, directory, text, seed, test_timeout):
        assert (block_name, seed) == (BLOCK, SEED)
        which = "clean" if text == SAMPLE else TEXTS.index(text)
        with self.lock:
            self.calls.append((which, directory.rsplit("/", 1)[-1], test_timeout))
            self.now += EVALUATION_S
        if which in self.fail:
            raise RuntimeError(self.fail[which])
        passed = which == "clean" or which in self.survive
        return {"built": True, "passed": passed,
                "error": "" if passed else f"AssertionError: m{which:02d} caught",
                "build_s": 10.0, "test_s": 20.0,
                "status": "survived" if passed else "killed", "wall_s": 30.0}

    def evaluated(self):
        return sorted(c[0] for c in self.calls if c[0] != "clean")


@pytest.fixture
def evaluation(monkeypatch, tmp_path):
    fake = FakeEvaluation()
    monkeypatch.setattr(mutants, "_evaluate", fake)
    monkeypatch.setattr(mutants, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    monkeypatch.setattr(mutants, "rtl", lambda block_name: SAMPLE)
    monkeypatch.setattr(mutants, "OUT", tmp_path / "build" / "mutants")
    monkeypatch.setattr(mutants, "DOC", tmp_path / "mutants.md")
    monkeypatch.setattr(mutants, "RECORD", tmp_path / "mutants.json")
    return fake


def campaign(client, tmp_path, **options):
    with Store(tmp_path / "store.sqlite") as store:
        return mutants.campaign([BLOCK], COUNT, SEED, client=client, store=store,
                                log=lambda line: None, **options)


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


# ------------------------------------------------------------------ the campaign on the executor

def test_every_evaluation_is_a_job_and_its_verdict_a_stored_row(dask_client, evaluation,
                                                                 submitted_jobs, tmp_path):
    results = campaign(dask_client, tmp_path)
    assert submitted_jobs == [(f"{BLOCK} clean design", ["clean_job"]),
                         (f"{BLOCK} mutants", ["evaluate_job"] * COUNT)]
    # Each in its own work folder, the mutants with the clean run's time-out (3x its 20 s).
    assert sorted(evaluation.calls, key=str) == sorted(
        [("clean", "clean", mutants.BUILD_TIMEOUT)]
        + [(k, f"m{k:02d}", 80) for k in range(COUNT)], key=str)
    got = [(r["index"], r["status"], r["line"], r["what"]) for r in
           results["blocks"][BLOCK]["mutants"]]
    assert got == [(k, "survived" if k in (1, 4) else "killed", m.line, m.what)
                   for k, m in enumerate(CHOSEN)]
    assert results["blocks"][BLOCK]["clean"]["status"] == "survived"

    stored = store_rows(tmp_path / "store.sqlite")
    tools = mutants.verdict_tools(BLOCK)
    assert sorted(r[1] for r in stored) == sorted(map(sha256, [SAMPLE, *TEXTS]))
    assert {(r[0], r[2], r[3], r[4], r[5]) for r in stored} == {
        ("mutant", json.dumps(tools, sort_keys=True, separators=(",", ":")), "", SEED, "ok")}
    assert set(tools) == {"block", "tests", *mutants.TEST_PACKAGES, "evaluation", "timeout"}
    with Store(tmp_path / "store.sqlite") as store:
        row = store.get(mutants.verdict_key(TEXTS[1], tools, SEED))
        assert (row.result["status"], row.params) == ("survived", {"block": BLOCK,
                                                                   "mutant": "m01"})


def test_a_second_run_evaluates_nothing_and_writes_the_same_reports(
        dask_client, evaluation, opened_clusters, tmp_path, monkeypatch):
    argv = [BLOCK, "--max", str(COUNT), "--seed", str(SEED), "--store",
            str(tmp_path / "store.sqlite")]
    mutants.main(argv)
    first = {path: path.read_bytes() for path in (mutants.DOC, mutants.RECORD)}
    assert json.loads(first[mutants.RECORD])["wall_s"] == (COUNT + 1) * EVALUATION_S
    assert f"| {BLOCK} | {SAMPLE.count(chr(10))} |" in first[mutants.DOC].decode()
    for path in first:
        path.unlink()
    # build/mutants/ gone too: the second run reads docs/mutants.json and the store only.
    (mutants.OUT / "results.json").unlink()
    mutants.RECORD.write_bytes(first[mutants.RECORD])
    evaluation.calls.clear()
    submits = []
    monkeypatch.setattr(dask_client, "submit", lambda *a, **k: submits.append(a))
    mutants.main(argv)
    assert (submits, evaluation.calls) == ([], [])
    assert {path: path.read_bytes() for path in first} == first


def test_a_failing_evaluation_is_stored_with_its_reason_and_the_campaign_goes_on(
        dask_client, evaluation, tmp_path):
    evaluation.fail = {2: "the worker's disk is full"}
    results = campaign(dask_client, tmp_path)
    got = {r["index"]: (r["status"], r.get("error")) for r in results["blocks"][BLOCK]["mutants"]}
    assert got[2] == ("failed", "RuntimeError: the worker's disk is full")
    assert [got[k][0] for k in (0, 1, 3, 4, 5)] == ["killed", "survived", "killed", "survived",
                                                   "killed"]
    assert evaluation.evaluated() == list(range(COUNT))
    failed = [r for r in store_rows(tmp_path / "store.sqlite") if r[5] == "failed"]
    assert [(r[1], r[6]) for r in failed] == [(sha256(TEXTS[2]),
                                               "RuntimeError: the worker's disk is full")]
    # No verdict: counted neither killed nor survived, said so, and listed with its reason.
    page = mutants.report(results)
    lines, sites = SAMPLE.count("\n"), len(mutants.sites(SAMPLE))
    assert f"| {BLOCK} | {lines} | {sites} | {COUNT} | 0 | 3 | 2 (0) | 60 % |" in page
    assert "1 mutant(s) have no verdict" in page
    assert "| failed | `RuntimeError: the worker's disk is full` |" in page

    evaluation.calls.clear()
    campaign(dask_client, tmp_path)
    assert evaluation.calls == []     # the failure is kept: not run again unasked
    evaluation.fail = {}
    results = campaign(dask_client, tmp_path, retry_failed=True)
    assert evaluation.evaluated() == [2]
    assert results["blocks"][BLOCK]["mutants"][2]["status"] == "killed"


def test_a_failing_clean_design_stops_the_campaign_and_is_stored(dask_client, evaluation,
                                                                 submitted_jobs, tmp_path):
    evaluation.fail = {"clean": "killed: AssertionError: a test of the clean design"}
    with pytest.raises(SystemExit, match="the clean monitor fails its own subset .RuntimeError"):
        campaign(dask_client, tmp_path)
    assert [what for what, _ in submitted_jobs] == [f"{BLOCK} clean design"]
    assert [(r[1], r[5]) for r in store_rows(tmp_path / "store.sqlite")] == [(sha256(SAMPLE),
                                                                         "failed")]


# ------------------------------------------------------------------ --rerun-survivors

def test_rerun_survivors_evaluates_the_survivors_under_the_new_tests_only(dask_client, evaluation,
                                                                          tmp_path, monkeypatch):
    """Tests added (another tests digest): the survivors (m01, m04) and the clean design are
    evaluated again, one of them killed now; the killed keep their verdicts. A second
    --rerun-survivors evaluates nothing. The store answers only for the tests of its key: a
    full campaign after that evaluates again the mutants killed under the old tests."""
    monkeypatch.setattr(mutants, "tests_digest", lambda: "tests before")
    campaign(dask_client, tmp_path)
    monkeypatch.setattr(mutants, "tests_digest", lambda: "tests after")
    evaluation.calls.clear()
    evaluation.survive = {4}
    with Store(tmp_path / "store.sqlite") as store:
        results = mutants.rerun_survivors([BLOCK], client=dask_client, store=store,
                                          log=lambda line: None)
    assert sorted(c[0] for c in evaluation.calls if c[0] == "clean") == ["clean"]
    assert evaluation.evaluated() == [1, 4]
    got = [(r["status"], r.get("rerun", False)) for r in results["blocks"][BLOCK]["mutants"]]
    assert got == [("killed", False), ("killed", True), ("killed", False), ("killed", False),
                   ("survived", True), ("killed", False)]
    assert results["blocks"][BLOCK]["rerun_s"] == 3 * EVALUATION_S
    page = mutants.report(results)
    assert "## Survivors of the first run, killed by tests added for them" in page

    evaluation.calls.clear()
    record = mutants.RECORD.read_bytes()
    with Store(tmp_path / "store.sqlite") as store:
        mutants.rerun_survivors([BLOCK], client=dask_client, store=store, log=lambda line: None)
    assert evaluation.calls == [] and mutants.RECORD.read_bytes() == record

    campaign(dask_client, tmp_path)
    assert evaluation.evaluated() == [0, 2, 3, 5]


# ------------------------------------------------------------------ the key's tests part

def test_the_tests_digest_follows_every_test_source(tmp_path, monkeypatch):
    sources = [tmp_path / name for name in ("tb_monitor.py", "runner.py")]
    for path in sources:
        path.write_text("# a test source\n")
    monkeypatch.setattr(mutants, "_test_sources", lambda: sources)
    before = mutants.tests_digest()
    sources[0].write_text("# a test source, and a test added\n")
    assert mutants.tests_digest() != before


def test_a_worker_of_another_checkout_refuses_the_job(evaluation):
    with pytest.raises(RuntimeError, match="test sources"):
        mutants.evaluate_job(BLOCK, "/nowhere/m00", TEXTS[0], SEED, 80, "other tests")
    assert evaluation.calls == []


def test_the_real_test_sources_include_the_testbenches_and_the_runner():
    names = {f"{f.parent.name}/{f.name}" for f in mutants._test_sources()}
    assert {"tb/tb_monitor.py", "tb/profile.py", "golden/monitor.py", "hw/monitor.py",
            "spartan_rtl/runner.py", "spartan_rtl/lint_waivers.vlt"} <= names
    assert {"gemm/__init__.py", "gemm/parts.py"} <= names     # a subpackage of hw's


# ------------------------------------------------------------------ the command line

def test_the_command_line_opens_the_cluster_and_the_store_it_is_given(evaluation,
                                                                      opened_clusters, tmp_path):
    store = tmp_path / "explore.sqlite"
    argv = [BLOCK, "--max", "2", "--seed", str(SEED), "--jobs", "3", "--store", str(store)]
    mutants.main(argv)
    mutants.main(argv + ["--scheduler", "tcp://scheduler:8786"])
    assert opened_clusters == [(None, 3), ("tcp://scheduler:8786", 3)]
    assert len(store_rows(store)) == 3      # the clean design and 2 mutants, evaluated once


def test_an_unreachable_scheduler_is_one_line_and_nothing_is_written(evaluation, tmp_path,
                                                                     capsys, monkeypatch):
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    with pytest.raises(SystemExit) as e:
        mutants.main([BLOCK, "--max", "2", "--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "tcp://127.0.0.1:1" in err
    assert list(tmp_path.iterdir()) == [] and evaluation.calls == []


@pytest.mark.parametrize("argv, says", [
    (["--jobs", "0"], "--jobs must be a positive integer"),
    (["nosuchblock"], "block must be one of"),
    (["--rerun-survivors"], "no campaign's results"),
])
def test_bad_input_is_one_line_and_exit_status_2(evaluation, tmp_path, capsys, argv, says):
    with pytest.raises(SystemExit) as e:
        mutants.main(argv + ["--store", str(tmp_path / "s.sqlite")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and says in err
    assert list(tmp_path.iterdir()) == []


def test_a_store_that_is_no_sqlite_file_is_refused(evaluation, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(SystemExit) as e:
        mutants.main([BLOCK, "--store", str(notes)])
    assert e.value.code == 2 and "--store" in capsys.readouterr().err
    assert notes.read_text() == "my notes\n" and sorted(tmp_path.iterdir()) == [notes]

