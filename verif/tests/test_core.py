"""Spartan core: parameter checks and the cocotb testbench (cocotbext-axi) in Verilator and
Icarus. The register map's forms (manifest, SystemRDL, C header, IP-XACT, docs) are checked in
verif/tests/test_registers.py, the C driver in verif/tests/test_driver.py."""

import pytest

from spartan_rtl import runner
from spartan_rtl.golden.core import CoreModel
from spartan_rtl.hw.core import SpartanCore
from verif.tests.helpers import config_id

CONFIGS = [
    dict(),  # the defaults: lanes 8, width 8, k = n = 64, k_par 1, n_par 64, table_depth 64
    # max_tile_elems 96, three rows: the monitor's counts are 7 bits, exact to 127 elements,
    # so the testbench's long_tile reaches saturation with tiles of 4 to 6 rows.
    dict(lanes=4, width=16, signed=False, acc_width=24, k=32, n=16, k_par=4, n_par=8,
         b_banks=4, table_depth=8, max_tile_elems=96),
]


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(table_depth=3), ValueError, "table_depth must be a power of two from 1 to 1024, not 3"),
    (dict(k=60), ValueError, "k must be a multiple of lanes (8), not 60"),
    (dict(lanes=8, n_par=4), ValueError,
     "n_par must be a multiple of lanes (8) dividing n (64), not 4"),
    (dict(width="8"), TypeError, "width must be an integer from 1 to 32, not '8'"),
])
def test_bad_parameters(kwargs, error, message):
    with pytest.raises(error) as info:
        SpartanCore(**kwargs)
    assert str(info.value) == message


def test_register_map_rejects_overlap():
    from spartan_rtl.hw.axil import Field, Register, RegisterMap
    a = Register("A", 0x0, "a", (Field("A", 0, 32, "rw", "a"),))
    b = Register("B", 0x0, "b", (Field("B", 0, 32, "rw", "b"),))
    with pytest.raises(ValueError, match="register B must not overlap A, not at 0x0"):
        RegisterMap("x", [a, b])


def test_golden_b_packet_rule():
    """The rule for B packets of the wrong length (docs/core.md), worked by hand: k = 2, n = 4,
    two lanes, so B is 4 beats of 2 elements, row-major."""
    model = CoreModel(dict(k=2, n=4, lanes=2))
    with pytest.raises(ValueError, match="the first B packet must cover B"):
        model.load_b_packet([1, 2])  # the weights are undefined before a whole B
    model.load_b_packet(range(8))
    assert model.b_raw.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    model.load_b_packet([10, 11, 12, 13])      # short: the rest keeps its weights
    assert model.b_raw.tolist() == [[10, 11, 12, 13], [4, 5, 6, 7]]
    model.load_b_packet(range(20, 30))         # long: element 8 wraps to B[0, 0]
    assert model.b_raw.tolist() == [[28, 29, 22, 23], [24, 25, 26, 27]]
    with pytest.raises(ValueError, match="whole number of beats of 2 elements, not 3"):
        model.load_b_packet([1, 2, 3])


def test_golden_reset_keeps_weights():
    model = CoreModel(dict(k=2, n=4, lanes=2, table_depth=4))
    model.load_b_packet(range(8))
    model.mode, model.threshold, model.table_base, model.tile = 2, 0x40, 1, 3
    model.table[1] = (3, 8)
    model.counters["A_ERRORS"] = 5
    model.reset()
    assert (model.mode, model.threshold, model.table_base, model.tile) == (0, 0x80, 0, 0)
    assert model.table == {} and not any(model.counters.values())
    assert model.b_raw.tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]


@pytest.mark.parametrize("sim", runner.sims())
@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_core(config, sim):
    tiles = 10 if config.get("table_depth", 64) < 10 else 8
    runner.run("core", "spartan_rtl.tb.tb_core", config, sim=sim, name="regression",
               args={"tiles": tiles, "rows": 3})
