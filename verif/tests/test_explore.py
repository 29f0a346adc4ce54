"""``spartan explore`` (issue 25): the result store's keys, the Dask executor's faults on a
LocalCluster of 2 workers (a worker killed mid-job, a failing job, a rerun from the store, Ctrl-C,
an unreachable scheduler) with cheap fake jobs, and the sweep's ranking and choice with synthesis
and placement replaced by stubs. No Yosys, no nextpnr: seconds, beside the cluster's start."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")

from spartan_rtl import area_model, cli, estimate, jobs  # noqa: E402
from spartan_rtl.area_model import AreaModel  # noqa: E402
from spartan_rtl.explore import TWIN_PLACEMENTS, Explorer, JobKinds, Request, explore  # noqa: E402
from spartan_rtl.explore_jobs import Budget, candidates, twin  # noqa: E402
from spartan_rtl.explore_report import format_answer  # noqa: E402
from spartan_rtl.golden import traces  # noqa: E402
from spartan_rtl.golden.engine_timing import EngineTiming  # noqa: E402
from spartan_rtl.hw import blocks  # noqa: E402
from spartan_rtl.store import Key, Store  # noqa: E402
from verif.flows import ROOT

TRACE = ROOT / "data" / "traces" / "digits_cnn_epoch15.npz"


# ------------------------------------------------------------------ fake jobs (on the workers)

def note_attempt(folder, name):
    """Leave a file per run of a job: how many times it ran, and in which process (named so
    that they sort in the order they were made)."""
    path = Path(folder) / f"{name}.{time.time_ns():020d}.{os.getpid()}"
    path.write_text(str(os.getpid()))


def attempts(folder, name):
    return sorted(Path(folder).glob(f"{name}.*"))


def double_job(folder, name, value):
    note_attempt(folder, name)
    return {"double": 2 * value}


def stall_first_job(folder, name, value):
    """The first run waits to be killed; a later one answers."""
    first = not attempts(folder, name)
    note_attempt(folder, name)
    if first:
        time.sleep(120)
    return {"double": 2 * value}


def failing_job(folder, name, value):
    note_attempt(folder, name)
    raise RuntimeError(f"tool failed on {value}\nsecond line of the log")


def fake_verilog(block, changed, family):
    return {"sha256": "v-" + ",".join(f"{k}={v}" for k, v in sorted(changed.items()))}


def fake_netlist(block, changed, family, build):
    """LUTs grow with the resident chunk, a dense-only twin's half as fast; a DSP a
    multiplier."""
    p = blocks.get(block).resolve(changed)
    lut = 10 * p["k"] * p["n"] // (1 if p["sparse"] else 2)
    return {"key": "k", "lut": lut, "ff": 100, "bram": 1, "dsp": p["n_par"], "harness_ffs": 0}


def fake_place(block, changed, family, device, seed, freq, build, netlist_key, timeout_s):
    return {"fits": True, "reason": None,
            "fmax_mhz": fake_fmax(blocks.get(block).resolve(changed), seed)}


def slow_wide_place(block, changed, family, device, seed, freq, build, netlist_key, timeout_s):
    """As ``fake_place``, but ``n`` = 16 candidates route past the time limit (as placement
    jobs do, a SynthError naming it)."""
    if changed.get("n") == 16:
        raise RuntimeError(f"nextpnr did not finish within {timeout_s / 60:g} min")
    return fake_place(block, changed, family, device, seed, freq, build, netlist_key, timeout_s)


def fake_fmax(changed, seed):
    return 150.0 - changed["k"] / 4 - seed


def fake_tools():
    return {"yosys": "fake"}


# ------------------------------------------------------------------ fixtures

@pytest.fixture(scope="module")
def client():
    with jobs.cluster(n_workers=2, dashboard=False) as c:
        yield c


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "results.sqlite") as s:
        yield s


def fake(kind, name, value, folder, function=double_job):
    return jobs.Job(Key.of(kind, f"design-{name}", {"tool": "1"}), function,
                    (str(folder), name, value), name, {"value": value})


# ------------------------------------------------------------------ the store

def test_store_keys_separate_every_part(tmp_path):
    base = dict(kind="place", design="abc", tools={"yosys": "1", "nextpnr": "2"},
                device="LFE5U-25F", seed=1)
    variants = [dict(base, kind="netlist"), dict(base, design="abd"),
                dict(base, tools={"yosys": "1", "nextpnr": "3"}),
                dict(base, device="LFE5U-45F"), dict(base, seed=2)]
    with Store(tmp_path / "s.sqlite") as s:
        assert s.put(Key.of(**base), result={"fmax_mhz": 1.0})
        for i, v in enumerate(variants):
            assert s.get(Key.of(**v)) is None
            assert s.put(Key.of(**v), result={"fmax_mhz": float(i + 2)})
        # Tool versions are a mapping: their order does not make another key.
        same = Key.of(**dict(base, tools={"nextpnr": "2", "yosys": "1"}))
        assert not s.put(same, result={"fmax_mhz": 99.0})
        assert s.get(same).result == {"fmax_mhz": 1.0}
        assert s.count() == 1 + len(variants)
    with Store(tmp_path / "s.sqlite") as again:    # kept on disk
        assert again.get(Key.of(**base)).result == {"fmax_mhz": 1.0}


def test_store_keeps_failures_with_their_reason(tmp_path):
    key = Key.of("netlist", "abc", {"yosys": "1"})
    with Store(tmp_path / "s.sqlite") as s:
        s.put(key, reason="yosys failed", params={"lanes": 8})
        row = s.get(key)
        assert (row.ok, row.reason, row.result, row.params) == \
            (False, "yosys failed", None, {"lanes": 8})
        assert s.forget_failed(key) and s.get(key) is None
        s.put(key, result={"lut": 5})
        assert not s.forget_failed(key) and s.get(key).ok


# ------------------------------------------------------------------ the executor's faults

def kill_when_started(folder, name, killed):
    """Kill (SIGKILL) the worker process running the first attempt of job ``name``."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not attempts(folder, name):
        time.sleep(0.05)
    found = attempts(folder, name)
    if found:
        pid = int(found[0].read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)


def test_a_worker_killed_mid_job_is_retried_and_stored_once(client, store, tmp_path):
    killed = []
    killer = threading.Thread(target=kill_when_started, args=(tmp_path, "victim", killed))
    killer.start()
    job = fake("fake", "victim", 21, tmp_path, stall_first_job)
    rows = jobs.run(client, [job, fake("fake", "bystander", 1, tmp_path)], store)
    killer.join()
    assert killed, "the job never started"
    runs = attempts(tmp_path, "victim")
    assert len(runs) == 2 and int(runs[1].read_text()) != killed[0]
    assert rows[job.key].ok and rows[job.key].result == {"double": 42}
    assert store.count("fake") == 2
    jobs.run(client, [job], store)    # from the store: not run a third time
    assert len(attempts(tmp_path, "victim")) == 2


def test_a_failing_job_is_recorded_and_the_sweep_goes_on(client, store, tmp_path):
    sweep = [fake("fake", "a", 1, tmp_path), fake("fake", "bad", 2, tmp_path, failing_job),
             fake("fake", "b", 3, tmp_path)]
    rows = jobs.run(client, sweep, store)
    assert [rows[j.key].ok for j in sweep] == [True, False, True]
    assert rows[sweep[1].key].reason == "RuntimeError: tool failed on 2"
    assert rows[sweep[2].key].result == {"double": 6}
    jobs.run(client, sweep, store)    # a stored failure is not run again ...
    assert len(attempts(tmp_path, "bad")) == 1
    jobs.run(client, sweep, store, retry_failed=True)    # ... unless asked
    assert len(attempts(tmp_path, "bad")) == 2 and len(attempts(tmp_path, "a")) == 1


def test_a_second_run_returns_from_the_store(client, tmp_path):
    sweep = [fake("fake", f"job{i}", i, tmp_path) for i in range(6)]
    with Store(tmp_path / "s.sqlite") as s:
        first = jobs.run(client, sweep, s)
    with Store(tmp_path / "s.sqlite") as s:
        second = jobs.run(client, sweep, s)
    assert {k: r.result for k, r in first.items()} == {k: r.result for k, r in second.items()}
    assert [second[j.key].result["double"] for j in sweep] == [0, 2, 4, 6, 8, 10]
    assert all(len(attempts(tmp_path, f"job{i}")) == 1 for i in range(6))


def stored_rows(path):
    """``{(kind, design, tools, device, seed): (status, result, stored)}`` of the SQLite store at
    ``path``, read-only ({} before the file and its table exist: the command creates the file
    first)."""
    if not path.exists():
        return {}
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
        try:
            return {tuple(row[:5]): row[5:] for row in db.execute(
                "SELECT kind, design, tools, device, seed, status, result, stored FROM results")}
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            return {}


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_cancels_the_sweep_and_every_stored_row_is_whole(tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the command's process group: the client and the
    LocalCluster's 2 workers) while ``spartan explore`` computes its cycle figures: exit 130
    with ``spartan: interrupted`` and no traceback; the store passes SQLite's integrity check
    and every row is whole (an ``ok`` row's result parses); a rerun keeps those rows as they
    were and computes only the rest."""
    store = tmp_path / "s.sqlite"
    argv = [sys.executable, "-m", "spartan_rtl.cli", "explore", str(TRACE), "--device",
            "LFE5U-25F", "--synth", "0", "--workers", "2", "--store", str(store)]
    # As a shell starts a foreground command: SIGINT at its default (a pytest-xdist worker,
    # this test's parent under `make test`, ignores it, and an ignored SIGINT is inherited).
    first = subprocess.Popen(argv, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, start_new_session=True, preexec_fn=_default_sigint)
    deadline = time.monotonic() + 600
    while len(stored_rows(store)) < 3:
        assert first.poll() is None, f"explore ended uninterrupted: {first.stderr.read()}"
        assert time.monotonic() < deadline, "no cycle figures stored within 600 s"
        time.sleep(0.1)
    os.killpg(first.pid, signal.SIGINT)
    _, err = first.communicate(timeout=300)
    assert first.returncode == 130, err
    assert err.splitlines()[-1] == "spartan: interrupted" and "Traceback" not in err, err
    with contextlib.closing(sqlite3.connect(store)) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    kept = stored_rows(store)
    assert all(json.loads(result) is not None for status, result, _ in kept.values()
               if status == "ok")
    rerun = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr
    after = stored_rows(store)
    assert {key: after[key] for key in kept} == kept, "a row stored before Ctrl-C changed"
    assert len(after) > len(kept), \
        f"the interrupted run had stored every row ({len(kept)}): nothing was cut"


def test_an_unreachable_scheduler_is_one_line_and_exit_2(tmp_path, capsys):
    store = tmp_path / "never.sqlite"
    started = time.monotonic()
    rc = cli.main(["explore", str(TRACE), "--device", "LFE5U-25F", "--synth", "0",
                   "--scheduler", "tcp://127.0.0.1:1", "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and "tcp://127.0.0.1:1" in err and "does not answer" in err
    assert not store.exists() and list(tmp_path.iterdir()) == []
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("argv, names", [
    (["--device", "LFE5U-12F"], "--device"),
    (["--device", "LFE5U-25F", "--set", "lanes=8,3"], "lanes"),
    (["--device", "LFE5U-25F", "--set", "colour=1"], "colour"),
    (["--device", "LFE5U-25F", "--set", "lanes"], "--set"),
    (["--device", "LFE5U-25F", "--seeds", "0"], "--seeds"),
    (["--device", "LFE5U-25F", "--set", "lanes=64", "--set", "n=16"], "--set"),
])
def test_bad_input_is_one_line_and_exit_2(argv, names, tmp_path, capsys):
    store = tmp_path / "s.sqlite"
    rc = cli.main(["explore", str(TRACE), *argv, "--store", str(store)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and names in err
    assert not store.exists()


def test_a_store_that_is_no_sqlite_file_is_refused(tmp_path, capsys):
    other = tmp_path / "notes.txt"
    other.write_text("my notes\n")
    rc = cli.main(["explore", str(TRACE), "--device", "LFE5U-25F", "--store", str(other)])
    assert rc == 2 and "--store" in capsys.readouterr().err
    assert other.read_text() == "my notes\n"


# ------------------------------------------------------------------ the sweep, synthesis stubbed

def tiny_trace(path):
    rng = np.random.default_rng(7)

    def sparse(shape, density):
        return (rng.random(shape) < density) * rng.integers(1, 5, shape)

    traces.save(path, [("c1", sparse((48, 9), 0.9), (8, 1, 3, 3), sparse((48, 8), 0.4)),
                       ("c2", sparse((40, 72), 0.3), (16, 8, 3, 3), sparse((40, 16), 0.2))])
    return traces.load(path)


RANGES = {"lanes": (8,), "k": (16, 32, 64), "n": (8, 16), "n_par": (8,), "acc_rows": (8, 32)}
STUBS = JobKinds(verilog=fake_verilog, netlist=fake_netlist, place=fake_place,
                 synth_tools=fake_tools, area_model=AreaModel)


def model_cycles(trace, params, dense=False):
    layers = estimate.engine_trace(trace, EngineTiming.of(params), 0xF0)
    return estimate.engine_totals(layers)["dense_cycles" if dense else "adaptive_cycles"]


def test_candidates_are_ranked_by_the_cycle_model_and_the_fitting_ones_placed(
        client, store, tmp_path):
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    assert len(cands) == 12 and invalid == 0
    max_lut = 10 * 32 * 8    # k*n <= 256 fits: k=16 (both n), k=32 n=8
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=max_lut, ff=10**6, dsp=28,
                                                         bram=56), RANGES, seeds=2, synth=2)
    answer = explore(Explorer(client, store, request, STUBS), cands, invalid)
    cycles = {c: model_cycles(trace, c.params) for c in cands}
    assert [cycles[c] for c, _ in answer.ranked] == sorted(cycles.values())
    fitting = [c for c, _ in answer.ranked if c.params["k"] * c.params["n"] <= 256]
    # The baseline is a dense-only twin: half the LUTs in the stub, so k*n <= 512 fits (a
    # larger build than any sparse one that fits), timed by the twin's model.
    twins = [twin(c) for c in cands if c.params["k"] * c.params["n"] <= 512]
    assert any(t.params["k"] * t.params["n"] == 512 for t in twins)
    dense_best = min(twins, key=lambda t: model_cycles(trace, t.params, dense=True))
    assert dense_best.is_twin and dense_best.label.endswith("sparse=False")
    assert {p.candidate for p in answer.placed} == {*fitting[:2], dense_best}

    def steps(c, dense=False):
        fmax = (fake_fmax(c.params, 1) + fake_fmax(c.params, 2)) / 2
        return fmax * 1e6 / model_cycles(trace, c.params, dense)

    placed = [p.candidate for p in answer.placed if not p.candidate.is_twin]
    best = max(placed, key=steps)
    assert answer.best.candidate == best
    assert answer.best.steps_per_s == pytest.approx(steps(best))
    assert answer.dense_is_twin and answer.dense_best.candidate == dense_best
    assert answer.speedup == pytest.approx(steps(best) / steps(dense_best, dense=True))
    # The twin's model: every tile dense, its own mask timing (not the sparse build's).
    assert model_cycles(trace, dense_best.params) == model_cycles(trace, dense_best.params,
                                                                  dense=True)


def test_without_a_fitting_twin_the_baseline_is_the_placed_builds_forced_dense(
        client, store, tmp_path):
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=10**6, ff=10**6, dsp=28,
                                                         bram=56), RANGES, seeds=1, synth=2)

    def no_twin_routes(block, changed, family, device, seed, freq, build, netlist_key,
                       timeout_s):
        if changed.get("sparse") is False:
            raise RuntimeError("nextpnr did not finish within 40 min")
        return fake_place(block, changed, family, device, seed, freq, build, netlist_key,
                          timeout_s)
    kinds = JobKinds(verilog=fake_verilog, netlist=fake_netlist, place=no_twin_routes,
                     synth_tools=fake_tools, area_model=AreaModel)
    answer = explore(Explorer(client, store, request, kinds), cands, invalid)
    # The twins are placed in turn, fewest cycles first, up to TWIN_PLACEMENTS.
    failed = [p.candidate for p in answer.placed if not p.fits]
    by_dense = sorted((twin(c) for c in cands),
                      key=lambda t: (model_cycles(trace, t.params, dense=True), t.label))
    assert failed == by_dense[:TWIN_PLACEMENTS]
    assert not answer.dense_is_twin
    forced = max(answer.fitting, key=lambda p: p.dense_steps_per_s)
    assert answer.dense_best is forced and not forced.candidate.is_twin
    assert "forced dense, MODE 1 (no dense-only twin placed fits)" in format_answer(
        answer, request, "tiny")


def test_a_twin_that_does_not_place_gives_way_to_the_next(client, store, tmp_path):
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=10**6, ff=10**6, dsp=28,
                                                         bram=56), RANGES, seeds=1, synth=2)
    by_dense = sorted((twin(c) for c in cands),
                      key=lambda t: (model_cycles(trace, t.params, dense=True), t.label))
    unroutable = dict(by_dense[0].changed)

    def best_twin_does_not_route(block, changed, family, device, seed, freq, build,
                                 netlist_key, timeout_s):
        if changed == unroutable:
            raise RuntimeError("nextpnr did not finish within 40 min")
        return fake_place(block, changed, family, device, seed, freq, build, netlist_key,
                          timeout_s)
    kinds = JobKinds(verilog=fake_verilog, netlist=fake_netlist,
                     place=best_twin_does_not_route, synth_tools=fake_tools,
                     area_model=AreaModel)
    answer = explore(Explorer(client, store, request, kinds), cands, invalid)
    assert [p.candidate for p in answer.placed if not p.fits] == [by_dense[0]]
    assert answer.dense_is_twin and answer.dense_best.candidate == by_dense[1]
    assert [p.candidate for p in answer.fitting_twins] == [by_dense[1]]


def test_a_placement_past_its_time_limit_is_a_failure_and_the_rest_answer(
        client, store, tmp_path):
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=10**6, ff=10**6, dsp=28,
                                                         bram=56), RANGES, synth=3,
                      place_minutes=7)
    kinds = JobKinds(verilog=fake_verilog, netlist=fake_netlist, place=slow_wide_place,
                     synth_tools=fake_tools, area_model=AreaModel)
    answer = explore(Explorer(client, store, request, kinds), cands, invalid)
    late = [p for p in answer.placed if p.candidate.params["n"] == 16]
    assert late and all(not p.fits for p in late)
    assert {(what, reason) for what, _, reason in answer.failures} == {
        ("place and route", "RuntimeError: nextpnr did not finish within 7 min")}
    assert answer.best is not None and answer.best.candidate.params["n"] == 8
    assert all(p.candidate.params["n"] == 8 for p in answer.fitting)


def test_the_generate_command_builds_the_best_configuration(client, store, tmp_path):
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=10**6, ff=10**6, dsp=28,
                                                         bram=56), RANGES, synth=1)
    answer = explore(Explorer(client, store, request, STUBS), cands, invalid)
    # The default build's 64 multipliers exceed the budget: not placed, and the answer says so.
    assert answer.default is None and answer.over_default is None
    assert answer.default_reason == "needs 64 DSP, the budget is 28"
    words = answer.best.generate_command.split()
    assert words[:3] == ["spartan", "generate", "engine"]
    sets = dict(w.split("=") for w in words[4::2])
    params = cli.block_values(blocks.get("engine"), None, [f"{k}={v}" for k, v in sets.items()])
    assert params == {**answer.best.candidate.params, "multiplier": "ecp5"}


def test_the_default_build_is_placed_beside_and_the_answer_kept_as_json(
        client, tmp_path, monkeypatch, capsys):
    """The default build (k = n = 64, 64 multipliers: LUT 40960 and 64 DSP in the stub) is
    timed and placed although the ranges leave it out, and the JSON answer holds what the
    text says."""
    import json

    from spartan_rtl import explore as explore_module
    tiny_trace(tmp_path / "tiny.npz")
    monkeypatch.setattr(explore_module, "_budget",
                        lambda args: Budget(lut=10**6, ff=10**6, dsp=100, bram=100))
    out = tmp_path / "answer.json"
    args = cli.build_parser().parse_args([
        "explore", str(tmp_path / "tiny.npz"), "--device", "LFE5U-45F", "--synth", "1",
        "--store", str(tmp_path / "s.sqlite"), "--json", str(out),
        *(f"--set={k}={','.join(map(str, v))}" for k, v in RANGES.items())])
    monkeypatch.setattr(jobs, "cluster", lambda *a, **k: _Borrowed(client))
    assert explore_module.cmd_explore(args, STUBS) == 0
    text = capsys.readouterr().out
    doc = json.loads(out.read_text())
    default = doc["default"]
    assert default["label"] == "defaults" and default["fits"]
    assert default["fmax_mhz"] == fake_fmax(blocks.get("engine").resolve(), 1)
    trace = traces.load(tmp_path / "tiny.npz")
    assert default["adaptive_cycles"] == model_cycles(trace, blocks.get("engine").resolve())
    assert doc["over_default"] == pytest.approx(
        doc["best"]["steps_per_s"] / default["steps_per_s"])
    assert len(doc["ranked"]) == 10 and doc["candidates"] == 12
    assert "defaults" not in [r["label"] for r in doc["ranked"]]
    assert f"default build (spartan generate engine): {default['steps_per_s']:.1f} steps/s" \
        in text
    assert f"the best is {doc['over_default']:.2f}x that" in text


class _Borrowed:
    """The module's client lent to ``cmd_explore`` as its cluster, not closed after."""

    def __init__(self, client):
        self.client = client

    def __enter__(self):
        return self.client

    def __exit__(self, *exc):
        return False


def test_docs_results_shows_each_kept_answer_beside_its_default_build(client, store, tmp_path):
    import json

    from spartan_rtl.explore_report import answer_json
    from verif.flows import results
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    paths = []
    for device, dsp in (("LFE5U-25F", 28), ("LFE5U-85F", 156)):
        request = Request(trace, "tiny", device, Budget(lut=10**6, ff=10**6, dsp=dsp,
                                                        bram=200), RANGES, synth=1)
        answer = explore(Explorer(client, store, request, STUBS), cands, invalid)
        paths.append(tmp_path / f"{device}.json")
        paths[-1].write_text(json.dumps(answer_json(answer, request, "tiny.npz", "abc")))
    rows = [line for line in results.explore_md(paths) if line.startswith("| LFE5U")]
    assert len(rows) == 2
    small, big = (json.loads(p.read_text()) for p in paths)
    assert small["best"]["label"] in rows[0] and big["best"]["label"] in rows[1]
    assert "not placed: needs 64 DSP, the budget is 28" in rows[0]
    assert f"the best is {big['over_default']:.2f}x that" in rows[1]
    assert f"{big['speedup_over_dense']:.2f}x the best dense-only" in rows[1]
    assert results.explore_md([]) == []


def test_a_network_name_explores_its_layers_at_the_densities_of_networks_py(
        client, store, tmp_path):
    from spartan_rtl.explore import check_request
    args = cli.build_parser().parse_args([
        "explore", "alexnet", "--device", "LFE5U-85F", "--synth", "0",
        "--store", str(tmp_path / "s.sqlite"),
        # Large resident chunks: AlexNet's whole step is then a second a candidate.
        "--set=lanes=8", "--set=k=64", "--set=n=32,64", "--set=n_par=16,32",
        "--set=acc_rows=256"])
    request, _, (cands, invalid) = check_request(args)
    assert request.trace == "alexnet"
    answer = explore(Explorer(client, store, request, STUBS), cands, invalid)

    def network_cycles(params):
        layers = estimate.engine_network("alexnet", EngineTiming.of(params), 0xF0)
        return estimate.engine_totals(layers)["adaptive_cycles"]
    assert [cyc["adaptive_cycles"] for _, cyc in answer.ranked] == \
        sorted(network_cycles(c.params) for c in cands)
    assert answer.placed == [] and answer.default_reason == "not synthesised (--synth 0)"


# ------------------------------------------------------------------ the area and clock model

def law(p):
    """A LUT count linear in the model's LUT terms, coefficients chosen here."""
    sparse = 1 if p["sparse"] else 0
    return 900 + 60 * p["n_par"] + 40 * p["lanes"] + 5 * p["lanes"] ** 2 \
        + 25 * sparse * p["lanes"] ** 2 + 400 * sparse + 3 * p["k"]


def test_the_area_model_recovers_a_linear_law_and_its_error_finds_an_outlier():
    cands, _ = candidates({"lanes": (4, 8, 16), "k": (32, 64), "n": (16, 32, 64),
                           "n_par": (16, 32), "acc_rows": (64,)})
    # Twins at every lanes value: else the twins' lanes^2 is not told apart from the sparse
    # builds' (the flow's TWINS span them too).
    params = [c.params for c in cands] + [twin(c).params for c in cands
                                          if c.params["n"] == c.params["n_par"] == 16
                                          and c.params["k"] == 32]
    assert len(params) == len(cands) + 3
    exact = area_model.fit("lut", params, [law(p) for p in params])
    assert dict(zip(exact.terms, exact.coefficients)) == pytest.approx(
        {"1": 900, "n_par": 60, "lanes": 40, "lanes^2": 5, "sparse*lanes^2": 25, "sparse": 400,
         "k": 3, "block RAMs": 0}, abs=1e-6)
    assert exact.max_error < 1e-9 and len(exact.loo_errors) == len(params)
    # One row measured 20 % over the law: the fit on the others predicts the law there, so
    # that row's leave-one-out error is 1/1.2 - 1; the model's largest error says so.
    measured = [law(p) for p in params]
    measured[3] *= 1.2
    off = area_model.fit("lut", params, measured)
    assert off.loo_errors[3] == pytest.approx(1 / 1.2 - 1)
    assert off.max_error == pytest.approx(1 - 1 / 1.2)


def test_the_area_model_prunes_before_synthesis_and_is_checked_against_the_netlists(
        client, store, tmp_path):
    """A model putting every k = 64 build at 16000 LUTs (largest validation error 10 %)
    prunes them under a 10000-LUT budget: none is synthesised, each says why; the builds
    synthesised have their prediction beside their netlist in the answer."""
    trace = tiny_trace(tmp_path / "tiny.npz")
    cands, invalid = candidates(RANGES)
    lut_by_k = area_model.Fit("lut", ("k",), (250.0,), 5, (0.1, -0.05))
    kinds = JobKinds(verilog=fake_verilog, netlist=fake_netlist, place=fake_place,
                     synth_tools=fake_tools, area_model=lambda: AreaModel({"lut": lut_by_k}))
    request = Request(trace, "tiny", "LFE5U-25F", Budget(lut=10000, ff=10**6, dsp=28,
                                                         bram=56), RANGES, synth=2)
    explorer = Explorer(client, store, request, kinds)
    answer = explore(explorer, cands, invalid)
    deep = [c for c in cands if c.params["k"] == 64]
    deep += [twin(c) for c in deep]
    assert len(deep) == 8
    for c in deep:
        assert explorer.passed_over[c] == ("the area model puts it over the budget in LUT "
                                           "(about 16000 > 10000)")
    assert answer.pruned == len(deep)
    synthesised = {label: (predicted, measured)
                   for label, figure, predicted, measured in answer.model_checks}
    assert synthesised and all("k=64" not in label for label in synthesised)
    for c in cands + [twin(c) for c in cands]:
        if c.label in synthesised:
            assert synthesised[c.label] == (250.0 * c.params["k"], fake_netlist(
                "engine", dict(c.changed), "ecp5", None)["lut"])
    text = format_answer(answer, request, "tiny")
    assert f"{answer.pruned} candidates pruned before synthesis" in text
    assert f"LUT against this sweep's {len(synthesised)} measured" in text


def test_the_kept_area_model_rows_fit_within_their_stated_error():
    """docs/area_model.json (``python -m verif.flows.area_model --write``): every
    figure the pruning uses is fitted and validated on its rows."""
    import json
    model = AreaModel.load()
    for figure in ("lut", "dsp", "bram"):
        f = model.fits[figure]
        assert f.rows > len(f.terms) and len(f.loo_errors) == f.rows
    # The block RAMs counted from the memories' shapes are Yosys' own, build by build, but
    # for one: the 64 x 512-bit weight memory of lanes=16 n_par=64, which Yosys packs in 15
    # PDPW16KDs where the byte-enable shapes give 16 (at lanes=8, 16, as counted).
    off = [(row["changed"], area_model.memory_brams(row["params"]) - row["bram"])
           for row in json.loads(area_model.DEFAULT_PATH.read_text())["rows"]]
    off = [(changed, diff) for changed, diff in off if diff]
    assert len(off) <= 1 and all(abs(diff) <= 1 for _, diff in off), off


@pytest.mark.parametrize("flow, argv, names", [
    ("area_model", ["--place", "19"], "--place"),
    ("area_model", ["--device", "LFE5U-12F"], "--device"),
    ("explore_scale", ["--sizes", "5"], "--sizes"),
    ("explore_scale", ["--workers", "0"], "--workers"),
])
def test_the_model_and_scale_flows_refuse_bad_input_in_one_line(flow, argv, names, tmp_path,
                                                                 capsys):
    import importlib
    module = importlib.import_module(f"verif.flows.{flow}")
    store = tmp_path / "s.sqlite"
    extra = ["--store", str(store)] if flow == "area_model" else []
    with pytest.raises(SystemExit) as stop:
        module.main([*argv, *extra])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1 and names in err
    assert not store.exists()


def test_the_model_report_gives_each_row_its_leave_one_out_error():
    from verif.flows.area_model import report
    cands, _ = candidates({"lanes": (4, 8, 16), "k": (32, 64), "n": (16, 32, 64),
                           "n_par": (16,), "acc_rows": (64,)})
    rows = [{"changed": dict(c.changed), "params": c.params, "lut": law(c.params)}
            for c in cands]
    rows[2]["lut"] *= 1.2
    text = report(rows, AreaModel.from_rows(rows))
    line = next(x for x in text.splitlines() if x.startswith(f"| {cands[2].label} |"))
    assert f"{rows[2]['lut']:.4g} ({1 / 1.2 - 1:+.1%})" in line
