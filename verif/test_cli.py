"""The ``spartan`` command line (SPEC §3): listing, generation, and one-line errors with exit
status 2 and nothing written."""

import json
import re
import subprocess
import sys

import pytest

from hw import blocks
from hw.emit import write_atomically


def spartan(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hw.cli", *args], capture_output=True,
                          text=True, cwd=cwd)


def test_list_names_every_block_and_parameter():
    out = spartan("list")
    assert out.returncode == 0, out.stderr
    for block in blocks.BLOCKS.values():
        assert f"{block.name}  (top {block.top})" in out.stdout
        for p in block.params:
            assert re.search(rf"^\s+{p.name}\s+default", out.stdout, re.M), p.name


def test_generate_writes_verilog_and_manifest(tmp_path):
    out = spartan("generate", "monitor", "--set", "lanes=4", "--set", "width=16", "-o", str(tmp_path))
    assert out.returncode == 0, out.stderr
    verilog = (tmp_path / "spartan_monitor.v").read_text()
    doc = json.loads((tmp_path / "spartan_monitor.json").read_text())
    assert doc["block"] == "monitor" and doc["top"] == "spartan_monitor"
    assert doc["params"] == {"lanes": 4, "width": 16, "number_format": "int",
                             "max_tile_elems": 65536}
    for key in ("ports", "streams", "latency_cycles", "throughput_beats_per_cycle", "generator"):
        assert key in doc
    assert doc["generator"]["amaranth"] == "0.5.10"
    # The manifest's ports are exactly the Verilog module's ports, with the same widths.
    header = re.search(r"module spartan_monitor\((.*?)\);", verilog, re.S).group(1)
    assert sorted(p.strip() for p in header.split(",")) == sorted(p["name"] for p in doc["ports"])
    for port in doc["ports"]:
        decl = re.search(rf"^\s*(input|output)\s*(\[(\d+):0\])?\s*{port['name']};", verilog, re.M)
        assert decl, port["name"]
        assert decl.group(1) == {"in": "input", "out": "output"}[port["dir"]]
        assert (int(decl.group(3)) + 1 if decl.group(3) else 1) == port["width"]
    assert doc["streams"]["s_axis"]["beat_bits"] == 64
    assert doc["streams"]["s_axis"]["fields"][3] == {"name": "lane3", "lsb": 48, "width": 16}
    assert "module" in verilog and verilog.count("module ") == 1  # one flat module


def test_config_file_and_set_override(tmp_path):
    config = tmp_path / "cfg.toml"
    config.write_text('lanes = 16\nwidth = 32\nnumber_format = "fp"\n')
    out = spartan("generate", "monitor", "--config", str(config), "--set", "width=16",
                  "-o", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    doc = json.loads((tmp_path / "out" / "spartan_monitor.json").read_text())
    assert (doc["params"]["lanes"], doc["params"]["width"], doc["params"]["number_format"]) == \
        (16, 16, "fp")


@pytest.mark.parametrize("args, message", [
    (["generate", "monitor", "--set", "lanes=3"],
     "lanes must be a power of two from 1 to 64, not 3"),
    (["generate", "nosuch"], "block must be one of"),
    (["generate", "monitor", "--set", "colour=3"], "parameter must be one of lanes"),
    (["generate", "monitor", "--set", "lanes=eight"],
     "lanes must be a power of two from 1 to 64, not 'eight'"),
    (["generate", "monitor", "--set", "width=1.5"], "width must be an integer from 1 to 64, not '1.5'"),
    (["generate", "monitor", "--set", "lanes"], "--set must be NAME=VALUE, not 'lanes'"),
    (["generate", "monitor", "--config", "/nonexistent/cfg.toml"],
     "--config must be a readable TOML file, not '/nonexistent/cfg.toml'"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, args, message):
    out_dir = tmp_path / "out"
    out = spartan(*args, "-o", str(out_dir))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spartan: error: ") and message in lines[0], out.stderr
    assert not out_dir.exists() or not any(out_dir.iterdir())


def test_bad_toml_and_bad_value_in_config(tmp_path):
    broken = tmp_path / "broken.toml"
    broken.write_text("lanes = = 3\n")
    out = spartan("generate", "monitor", "--config", str(broken), "-o", str(tmp_path / "o"))
    assert out.returncode == 2 and "--config must be a readable TOML file" in out.stderr
    typed = tmp_path / "typed.toml"
    typed.write_text('lanes = "8"\n')
    out = spartan("generate", "monitor", "--config", str(typed), "-o", str(tmp_path / "o"))
    assert out.returncode == 2
    assert out.stderr.strip() == "spartan: error: lanes must be a power of two from 1 to 64, not '8'"


def test_write_atomically_leaves_nothing_on_failure(tmp_path):
    good = tmp_path / "a.v"
    blocked = tmp_path / "sub"
    blocked.write_text("a file where a directory is needed")
    with pytest.raises(OSError):
        write_atomically({good: "module a; endmodule\n", blocked / "b.json": "{}"})
    assert not good.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"]


def test_generate_replaces_existing_files_whole(tmp_path):
    for lanes in (8, 2):
        assert spartan("generate", "monitor", "--set", f"lanes={lanes}", "-o", str(tmp_path)).returncode == 0
    doc = json.loads((tmp_path / "spartan_monitor.json").read_text())
    assert doc["params"]["lanes"] == 2
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
