"""What several test modules share, so that no test module imports another: test ids of
parameter sets, the compactor's and expander's common cases, small configurations of every
block, the in-process ``spartan`` runner with its checks of the one-line error contract, a
Yosys-style module to mutate, the rows of a flow's store, and a small VCD whose every cycle
is known. (amaranth.sim helpers are in
verif/tests/amsim.py; the Dask fixtures in verif/tests/conftest.py.)"""

from __future__ import annotations

import contextlib
import io
import stat
from pathlib import Path

from hypothesis import strategies as st

from spartan_rtl.golden.formats import pack_beat, random_elements


def config_id(config):
    """A test id of a parameter set: ``lanes4-width16-signed0``, or ``defaults`` for ``{}``."""
    return "-".join(f"{k}{int(v) if isinstance(v, bool) else v}" for k, v in config.items()) \
        or "defaults"


# --- the ZVC pair: compactor and expander take the same parameters -----------------------------

# lanes {1,2,8,16} x width {8,16,32} x cols {lanes, 2*lanes, 64, 256} x both formats, covered
# so that every value of each appears (pairwise where it matters), not the full product.
ZVC_CONFIGS = [
    dict(lanes=1, width=16, number_format="fp", cols=2),      # cols = 2*lanes
    dict(lanes=2, width=8, number_format="int", cols=256),    # long rows, few lanes
    dict(lanes=8, width=8, number_format="int", cols=64),     # the defaults
    dict(lanes=16, width=32, number_format="fp", cols=16),    # cols = lanes: a row per beat
]
# amaranth.sim takes a minute over a 16-lane crossbar: the others, plus two more corners.
ZVC_AMSIM_CONFIGS = ZVC_CONFIGS[:3] + [dict(lanes=1, width=8, number_format="int", cols=1),
                                       dict(lanes=4, width=32, number_format="fp", cols=8)]

#: Parameter mistakes both reject with the same message.
ZVC_BAD_PARAMETERS = [
    (dict(lanes=3), ValueError, "lanes must be a power of two from 1 to 64, not 3"),
    (dict(lanes=128), ValueError, "lanes must be a power of two from 1 to 64, not 128"),
    (dict(lanes="8"), TypeError, "lanes must be a power of two from 1 to 64, not '8'"),
    (dict(width=0), ValueError, "width must be an integer from 1 to 64, not 0"),
    (dict(width=65), ValueError, "width must be an integer from 1 to 64, not 65"),
    (dict(number_format="bf16"), ValueError,
     "number_format must be one of 'int' or 'fp', not 'bf16'"),
    (dict(number_format="fp", width=1), ValueError,
     "width must be at least 2 for number_format 'fp', not 1"),
    (dict(cols=0), ValueError, "cols must be an integer from 1 to 4096, not 0"),
    (dict(cols=4097), ValueError, "cols must be an integer from 1 to 4096, not 4097"),
    (dict(cols=64.0), TypeError, "cols must be an integer from 1 to 4096, not 64.0"),
    (dict(cols=True), TypeError, "cols must be an integer from 1 to 4096, not True"),
    (dict(cols=12), ValueError, "cols must be a multiple of lanes (8), not 12"),
    (dict(lanes=64, cols=32), ValueError, "cols must be a multiple of lanes (64), not 32"),
]


def dense_stream(config, tiles, rng, np_rng):
    """``tiles`` dense tiles of 1 to 4 rows as compactor input beats ``(tdata, tlast, tuser)``:
    random densities, each tile bypass with probability 0.3."""
    lanes, width, cols, fmt = (config[k] for k in ("lanes", "width", "cols", "number_format"))
    beats = []
    for _ in range(tiles):
        rows = rng.randint(1, 4)
        raw = random_elements(np_rng, (rows * cols // lanes, lanes), width,
                              rng.choice([0.0, 0.1, 0.5, 1.0, rng.random()]), fmt)
        bypass = int(rng.random() < 0.3)
        beats += [(pack_beat(r, width), int(i == len(raw) - 1), bypass if i == 0 else 0)
                  for i, r in enumerate(raw)]
    return beats


# --- every block ------------------------------------------------------------------------------

#: Two small configurations of each block, different in sizes that change port widths.
IP_CONFIGS = {
    "monitor": ({"lanes": 4}, {"lanes": 2, "width": 16}),
    "compactor": ({"lanes": 4, "cols": 8}, {"lanes": 2, "cols": 4, "width": 4}),
    "expander": ({"lanes": 4, "cols": 8}, {"lanes": 2, "cols": 4, "width": 4}),
    "gemm": ({"lanes": 4, "k": 8, "n": 8, "n_par": 4}, {"lanes": 2, "k": 4, "n": 4, "n_par": 2}),
    "core": ({"lanes": 4, "k": 8, "n": 8, "n_par": 4, "table_depth": 4},
             {"lanes": 2, "k": 4, "n": 4, "n_par": 2, "table_depth": 2}),
    "engine": ({"lanes": 4, "k": 8, "n": 8, "n_par": 4, "table_depth": 4, "acc_rows": 8,
                "data_width": 32},
               {"lanes": 2, "width": 16, "k": 4, "n": 4, "n_par": 2, "table_depth": 2,
                "acc_rows": 8, "max_burst": 4, "data_width": 32}),
}


# --- the command line: in-process runs and the one-line error contract ------------------------

def snapshot(folder):
    """Every entry under ``folder`` (hidden ones too): kind, mode and bytes."""
    folder = Path(folder)
    if not folder.exists():
        return None
    state = {}
    for path in sorted(folder.rglob("*")):
        mode = path.lstat().st_mode
        state[str(path.relative_to(folder))] = (
            stat.S_IFMT(mode), stat.S_IMODE(mode),
            path.read_bytes() if stat.S_ISREG(mode) else None)
    return state


def run_cli(*argv):
    """``spartan ARGV`` in this process: (status, stdout, stderr)."""
    from spartan_rtl import cli
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            status = cli.main(list(argv))
        except SystemExit as e:  # argparse's --help and --version, as in a real run
            status = e.code
    return status, stdout.getvalue(), stderr.getvalue()


def assert_usage_error(status, stdout, stderr, *fragments):
    """The request failed as a user's mistake: one line on stderr with every fragment, exit
    status 2, nothing on stdout."""
    lines = stderr.splitlines()
    assert status == 2 and len(lines) == 1, (status, stderr)
    assert lines[0].startswith("spartan: error: ") and "Traceback" not in stderr, stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert stdout == ""


def config_cases(tmp):
    """Bad ``--config`` files written under ``tmp``: ``[(path, fragment of the error)]``."""
    cases = []
    deep_array = tmp / "deep_array.toml"
    deep_array.write_text("lanes = " + "[" * 5000 + "]" * 5000 + "\n")
    cases.append((deep_array, "--config must be a readable TOML file"))
    deep_table = tmp / "deep_table.toml"
    deep_table.write_text("[" + ".".join(f"t{i}" for i in range(40)) + "]\nlanes = 4\n")
    cases.append((deep_table, "nested at most 16 deep"))
    inline = tmp / "inline.toml"
    inline.write_text("params = " + "{a = " * 30 + "1" + "}" * 30 + "\n")
    cases.append((inline, "nested at most 16 deep"))
    binary = tmp / "binary.toml"
    binary.write_bytes(b"lanes = 4\n\xff\xfe\x00garbage")
    cases.append((binary, "in UTF-8"))
    huge = tmp / "huge.toml"
    huge.write_text("# " + "x" * (1 << 20) + "\n")
    cases.append((huge, "of at most 1048576 bytes"))
    cases.append((tmp, "(Is a directory)"))
    cases.append((Path("/dev/zero"), "(no regular file)"))
    wrong = tmp / "wrong.toml"
    wrong.write_text("[params]\nlanes = 4.5\n")
    cases.append((wrong, "lanes must be a power of two from 1 to 64, not 4.5"))
    table = tmp / "table.toml"
    table.write_text("[lanes]\nx = 1\n")
    cases.append((table, "lanes must be a power of two from 1 to 64, not {'x': 1}"))
    return cases


#: Text near TOML: parameter names, brackets, quotes, numbers and booleans.
TOML_TEXT = st.text(alphabet="lanes width=[]{}\"'.#\n0123456789xabtruefls,-+_ ", max_size=60)


# --- fault injection (verif/flows/mutants.py) -----------------------------------------------

#: A hand-written module in the style of Yosys' write_verilog: a counter with an enable, a
#: memory write, a handshake output and a comparison.
YOSYS_STYLE_MODULE = r"""module t(clk, rst, en, a, b, s_axis_tready, m_axis_tvalid, q);
  input clk;
  wire clk;
  input rst;
  wire rst;
  input en;
  wire en;
  input [3:0] a;
  wire [3:0] a;
  input [3:0] b;
  wire [3:0] b;
  output s_axis_tready;
  wire s_axis_tready;
  output m_axis_tvalid;
  wire m_axis_tvalid;
  output [3:0] q;
  wire [3:0] q;
  wire [3:0] _000_;
  wire [3:0] _001_;
  wire [3:0] _002_;
  wire _003_;
  reg [3:0] \core.count  = 4'h0;
  reg [3:0] mem [1:0];
  always @(posedge clk) begin
    if (en)
      mem[a[0]] <= b;
  end
  assign _000_ = \core.count  + 4'h1;
  assign _001_ = en ? _000_ : \core.count ;
  assign _002_ = rst ? 4'h0 : _001_;
  always @(posedge clk)
    \core.count  <= _002_;
  assign _003_ = a <= b;
  assign s_axis_tready = ~ _003_;
  assign m_axis_tvalid = _003_ & (| \core.count );
  assign q = mem[1] ^ \core.count ;
endmodule
"""


# --- the flows on the executor: their store ----------------------------------------------------

def store_rows(path):
    """``[(kind, design, tools, device, seed, status, reason)]`` of the store at ``path``, in
    the order of kind, device, seed and design."""
    import sqlite3
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT kind, design, tools, device, seed, status, reason FROM results"
                          " ORDER BY kind, device, seed, design").fetchall()
    finally:
        db.close()


# --- a small VCD whose every cycle is known ----------------------------------------------------
#
# One cycle per row; the values are set at the falling edge t = 10k ns and sampled by the rising
# edge t = 10k + 5 ns (edge number k).
#      rst valid ready last data  count   state
CYCLES = [
    (1, 0, 0, 0, 0x00, 0),   # reset
    (0, 1, 0, 0, 0xA1, 1),   # stall
    (0, 1, 1, 0, 0xA1, 2),   # transfer
    (0, 0, 1, 1, 0xFF, 3),   # starved (data and last are don't-care)
    (0, 1, 1, 1, 0xB2, 4),   # transfer, end of packet (2 beats)
    (0, 0, 0, 0, 0x00, 5),   # idle
    (0, 1, 1, 0, 0xC3, 6),   # transfer
    (0, 1, 1, 1, 0xC3, 7),   # transfer, end of packet (2 beats; same data: a new beat)
]
SIGNALS = [("clk", 1), ("rst", 1), ("s_axis_tdata", 8), ("s_axis_tvalid", 1),
           ("s_axis_tready", 1), ("s_axis_tlast", 1), ("count", 4)]


def small_vcd(path):
    ids = {name: chr(33 + i) for i, (name, _) in enumerate(SIGNALS)}
    width = dict(SIGNALS)
    lines = ["$timescale 1ns $end", "$scope module top $end"]
    for name, w in SIGNALS:
        lines.append(f"$var wire {w} {ids[name]} {name}" + (f" [{w - 1}:0]" if w > 1 else "")
                     + " $end")
    lines += ["$upscope $end", "$enddefinitions $end"]

    def value(name, v):
        return f"b{v:b} {ids[name]}" if width[name] > 1 else f"{v}{ids[name]}"

    for k, row in enumerate(CYCLES):
        lines.append(f"#{10 * k}")
        lines.append(value("clk", 0))
        for name, v in zip(["rst", "s_axis_tvalid", "s_axis_tready", "s_axis_tlast",
                            "s_axis_tdata", "count"], row):
            lines.append(value(name, v))
        lines += [f"#{10 * k + 5}", value("clk", 1)]
    lines.append(f"#{10 * len(CYCLES)}")
    lines.append(value("clk", 0))
    path.write_text("\n".join(lines) + "\n")
    return path
