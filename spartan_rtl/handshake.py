"""The four states of an AXI4-Stream channel in one clock cycle, from its ``valid`` and
``ready``: the one classifier the cocotb stream library (verif/tb/axis.py) counts with and the
waveform tools (``spartan waves``) draw and report with."""

#: In the order every report lists them.
STATES = ("transfer", "stall", "starved", "idle")


def cycle_state(valid, ready):
    """``transfer`` (valid & ready), ``stall`` (valid & !ready: the consumer holds the producer
    back), ``starved`` (ready & !valid: the consumer waits for data) or ``idle`` (neither)."""
    return ("transfer" if ready else "stall") if valid else ("starved" if ready else "idle")


def counters():
    """A zeroed count per state."""
    return dict.fromkeys(STATES, 0)
