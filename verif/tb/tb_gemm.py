"""cocotb testbench of the tile sparse GEMM (``spartan_gemm``), against golden/gemm.py.

Every test: ``A`` tiles in the ZVC form of golden/compactor.py, random idle cycles on
``s_axis_b``, ``s_axis_a_mask`` and ``s_axis_a_data`` independently, random back-pressure on
``m_axis_c``; every ``C`` element and every ``tlast`` compared with the golden product of the
tile and the ``B`` complete when the tile's first mask transferred (read from the transfer
cycles; with ``weight_sets = 2``, the tile's own chunk: tile ``t`` pairs with the ``t``-th ``B``
packet, and :meth:`GemmTB.tile` queues a fresh chunk before any tile that has none). The
statistics strobes are summed every cycle and compared, tile for tile, with the
cycle model's conflict cycles, MACs and empty rows. ``timing`` runs with inputs always valid and
the output always ready and compares cycles with :func:`spartan_rtl.golden.gemm.simulate` exactly;
``hidden_loads`` (two sets) sends each tile's chunk during the tile before and checks that the
tiles still follow one another as the model says, as if no ``B`` were loaded at all.
"""

import re

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from spartan_rtl.golden.compactor import encode_tile
from spartan_rtl.golden.formats import from_signed, pack_beat, random_elements
from spartan_rtl.golden.gemm import GemmTiming, gemm, row_passes, simulate
from spartan_rtl.tb.axis import Beat, Bench, check_sequence, read_int, test_args
from spartan_rtl.tb.profile import Profile, Waiver


class GemmTB:
    def __init__(self, dut):
        self.dut = dut
        self.args = test_args()
        self.bench = Bench(dut)
        p = self.bench.manifest["params"]
        self.p = p
        self.lanes, self.width, self.acc_width = p["lanes"], p["width"], p["acc_width"]
        self.k, self.n, self.signed = p["k"], p["n"], p["signed"]
        self.sets = p["weight_sets"]
        self.timing = GemmTiming.of(p)
        self.rng = self.bench.rng
        self.np_rng = np.random.default_rng(self.bench.seed)
        self.b_packets = []   # B matrices in the order sent
        self.tiles = []       # A tiles (raw) in the order sent
        self.tile_masks = []
        self.stream_errors = 0  # malformed A beats sent on purpose

    async def start(self, *, idle=0.3, backpressure=0.3):
        await self.bench.reset()
        b = self.bench
        self.src_b = b.source("s_axis_b", idle=idle)
        self.src_mask = b.source("s_axis_a_mask", idle=idle)
        self.src_data = b.source("s_axis_a_data", idle=idle)
        self.sink = b.sink("m_axis_c", backpressure=backpressure)
        self.stats = {"conflict": [], "macs": [], "empty": [], "issue": [], "err": []}
        self._task = cocotb.start_soon(self._watch_stats())

    def stop(self):
        for part in (self.src_b, self.src_mask, self.src_data, self.sink):
            part.stop()
        self._task.cancel()

    async def _watch_stats(self):
        """Cycle stamps of every statistics strobe (sampled where the next edge samples)."""
        d = self.dut
        while True:
            await FallingEdge(self.bench.clk)
            await ReadOnly()
            now = self.bench.cycle
            if read_int(d.stat_issue):
                self.stats["issue"].append(now)
                self.stats["macs"].append((now, read_int(d.stat_macs)))
            if read_int(d.stat_conflict):
                self.stats["conflict"].append(now)
            if read_int(d.stat_empty_row):
                self.stats["empty"].append(now)
            if read_int(d.err_a_stream):
                self.stats["err"].append(now)

    # -- stimulus ----------------------------------------------------------------------
    def random_matrix(self, shape, density, extreme=False):
        if extreme:
            # The largest products: most negative (signed) or all ones (unsigned), random signs.
            w = self.width
            if self.signed:
                values = self.np_rng.choice([-(1 << (w - 1)), (1 << (w - 1)) - 1, -1],
                                            size=shape)
                raw = from_signed(values, w)
            else:
                raw = np.full(shape, (1 << w) - 1, dtype=np.uint64)
            keep = self.np_rng.random(shape) < density
            return np.where(keep, raw, 0).astype(np.uint64)
        return random_elements(self.np_rng, shape, self.width, density)

    def load_b(self, b_raw=None, *, extreme=False):
        if b_raw is None:
            b_raw = self.random_matrix((self.k, self.n), self.rng.choice([1.0, 0.9, 0.5]),
                                       extreme)
        b_raw = np.asarray(b_raw, dtype=np.uint64)
        self.b_packets.append(b_raw)
        flat = b_raw.reshape(-1)
        beats = len(flat) // self.lanes
        self.src_b.send([Beat(pack_beat(flat[i * self.lanes:(i + 1) * self.lanes], self.width),
                              int(i == beats - 1)) for i in range(beats)])

    def tile(self, a_raw=None, *, rows=None, density=None, extreme=False, bad_data_last=False):
        if self.sets > 1 and len(self.b_packets) <= len(self.tiles):
            self.load_b()          # two sets: every tile takes a chunk of its own
        if a_raw is None:
            rows = rows or self.rng.randint(1, self.args.get("max_rows", 12))
            if density is None:
                density = self.rng.choice([0.0, 1.0, self.rng.random(), self.rng.random()])
            a_raw = self.random_matrix((rows, self.k), density, extreme)
        a_raw = np.asarray(a_raw, dtype=np.uint64)
        # The dense-only variant takes every row whole (the compactor's dense-bypass form).
        enc = encode_tile(a_raw, lanes=self.lanes, width=self.width, number_format="int",
                          bypass=not self.p["sparse"])
        self.tiles.append(a_raw)
        self.tile_masks.append([m for m, _ in enc.masks])
        masks = enc.masks
        if bad_data_last and not self.p["sparse"]:
            # The dense-only variant ignores masks: send the true ones, each flagged.
            masks = encode_tile(a_raw, lanes=self.lanes, width=self.width,
                                number_format="int").masks
            self.stream_errors += sum(m != (1 << self.k) - 1 for m, _ in masks)
        self.src_mask.send([Beat(m, last) for m, last in masks])
        data = enc.data
        if bad_data_last:
            data = [(d, 1 - last) for d, last in data]
            self.stream_errors += len(data)
        self.src_data.send([Beat(d, last) for d, last in data])

    async def b_loaded(self):
        """Wait until every queued B beat has transferred (the buffer has no defined contents
        before the first B packet, so the first tile waits for it)."""
        await self.bench.wait_until(lambda: self.src_b.idle_now, timeout=20 * self.k * self.n,
                                    what="B load")
        await FallingEdge(self.bench.clk)

    # -- checking ----------------------------------------------------------------------
    def expected_beats(self):
        return sum(len(t) for t in self.tiles) * self.n // self.lanes

    async def finish(self, timeout=None):
        total = self.expected_beats()
        cycles = sum(len(t) * self.n // self.lanes * (1 + self.k) for t in self.tiles)
        timeout = timeout or 4 * cycles + 20 * len(self.b_packets) * self.k * self.n + 2000
        await self.bench.drain({self.sink: total}, timeout=timeout, quiet=20)
        self.check()

    def _tile_starts(self):
        starts, row = [], 0
        for t in self.tiles:
            starts.append(self.src_mask.sent_cycles[row])
            row += len(t)
        return starts

    def _b_for(self, tile, start_cycle):
        """Tile ``tile``'s B: its own chunk (two sets; complete before ``start_cycle``), else
        the packet whose last beat transferred before ``start_cycle`` (the latest one)."""
        done = [c for b, c in zip(self.src_b.sent, self.src_b.sent_cycles) if b.last]
        if self.sets > 1:
            assert done[tile] < start_cycle, \
                f"tile {tile} started in cycle {start_cycle}, its chunk ended in {done[tile]}"
            return self.b_packets[tile]
        chosen = [i for i, c in enumerate(done) if c < start_cycle]
        assert chosen, f"a tile started in cycle {start_cycle} before any B was complete"
        return self.b_packets[chosen[-1]]

    def check(self):
        starts = self._tile_starts()
        expected = []
        beats_per_row = self.n // self.lanes
        for i, (a_raw, start) in enumerate(zip(self.tiles, starts)):
            c = gemm(a_raw, self._b_for(i, start), width=self.width, signed=self.signed,
                     acc_width=self.acc_width)
            flat = c.reshape(-1)
            count = len(a_raw) * beats_per_row
            for i in range(count):
                expected.append(Beat(pack_beat(flat[i * self.lanes:(i + 1) * self.lanes],
                                               self.acc_width), int(i == count - 1)))
        check_sequence("m_axis_c", self.sink.beats, expected)

        # One set: no B beat may transfer while a tile is being received (first to last mask
        # beat). Two: chunk c's first beat not before tile c-2's last mask beat (its set's
        # last user; that it waits for the tile's last pass, the products show).
        row, last_masks = 0, []
        for t in self.tiles:
            sent = self.src_mask.sent_cycles
            first, last = sent[row], sent[row + len(t) - 1]
            row += len(t)
            last_masks.append(last)
            if self.sets == 1:
                inside = [c for c in self.src_b.sent_cycles if first <= c <= last]
                assert not inside, \
                    f"B beats taken in cycles {inside[:4]} inside tile ({first}..{last})"
        if self.sets > 1:
            firsts = [c for i, c in enumerate(self.src_b.sent_cycles)
                      if i == 0 or self.src_b.sent[i - 1].last]
            for chunk, first in enumerate(firsts[2:len(last_masks) + 2], start=2):
                assert first > last_masks[chunk - 2], \
                    (f"chunk {chunk}'s first beat in cycle {first}, tile {chunk - 2}'s last "
                     f"mask in {last_masks[chunk - 2]}")

        # Statistics: the strobes summed over the run equal the model's totals (these do not
        # depend on timing, so random idle and back-pressure do not matter).
        total_conf = sum(row_passes(m, self.timing)[1] for ms in self.tile_masks for m in ms)
        total_macs = sum(bin(m).count("1") * self.n for ms in self.tile_masks for m in ms)
        total_empty = sum(m == 0 for ms in self.tile_masks for m in ms)
        total_passes = sum(row_passes(m, self.timing)[0] for ms in self.tile_masks for m in ms)
        assert len(self.stats["conflict"]) == total_conf, \
            f"conflict cycles {len(self.stats['conflict'])}, model {total_conf}"
        assert sum(v for _, v in self.stats["macs"]) == total_macs, \
            f"MACs {sum(v for _, v in self.stats['macs'])}, expected {total_macs}"
        assert len(self.stats["empty"]) == total_empty, \
            f"empty rows {len(self.stats['empty'])}, expected {total_empty}"
        assert len(self.stats["issue"]) == total_passes, \
            f"passes {len(self.stats['issue'])}, model {total_passes}"
        assert len(self.stats["err"]) == self.stream_errors, \
            f"err_a_stream fired {len(self.stats['err'])} times, expected {self.stream_errors}"


def _edge_rows(tb):
    """Rows with a single nonzero at the first and at the last column (and both)."""
    k = tb.k
    a = np.zeros((4, k), dtype=np.uint64)
    big = (1 << (tb.width - 1)) if tb.signed else (1 << tb.width) - 1
    a[0, 0] = big
    a[1, k - 1] = big
    a[2, 0] = 1
    a[2, k - 1] = (1 << tb.width) - 1
    a[3, k // 2] = 3
    return a


def route_reachable(p, lane, bank, copy):
    """Can any A row make GEMM lane ``lane`` of a group read bank ``bank``, copy ``copy``?
    Lane ``l`` holds the group's ``l``-th nonzero column ``x`` (so ``x >= l``); its copy is
    the number of lanes below it whose column is in the same bank, mod ``k_par/b_banks``. A
    row whose first group holds exactly the columns chosen realises any choice, so it is
    enough to ask whether ``l`` distinct columns below some ``x`` in ``bank`` can have that
    count."""
    k, banks = p["k"], p["b_banks"]
    copies = p["k_par"] // banks
    if not p.get("sparse", True):   # every column present: lane l reads column g*k_par + l
        return bank == lane % banks and copy == (lane // banks) % copies
    for x in range(lane, k):
        if x % banks != bank:
            continue
        same = len(range(bank, x, banks))   # columns below x in the bank
        lo, hi = max(0, lane - (x - same)), min(lane, same)
        if any(n % copies == copy for n in range(lo, hi + 1)):
            return True
    return False


def row_routes(p, columns):
    """``{(lane, bank, copy)}`` a row with nonzeros at ``columns`` makes the weight-buffer
    reads take: in each group of ``k_par`` nonzeros, lane ``i`` reads the bank of its column,
    copy = (earlier lanes of the group in that bank) mod ``k_par / b_banks``."""
    kp, banks = p["k_par"], p["b_banks"]
    copies = kp // banks
    cols = sorted(columns)
    routes = set()
    for g in range(0, len(cols), kp):
        group = cols[g:g + kp]
        for i, x in enumerate(group):
            rank = sum(1 for y in group[:i] if y % banks == x % banks)
            routes.add((i, x % banks, rank % copies))
    return routes


def route_rows(tb, candidates=400):
    """Rows (random nonzero values) that together take every (lane, bank, copy) read route a
    sparse row can take (:func:`route_reachable`). Candidates: for each route,
    a row built for it (lane ``l``'s column ``x`` in the bank, the ``l`` lanes below it chosen
    so that the right number share its bank), plus random rows of every density; then greedily
    the candidate that takes the most routes not yet taken, until none is left."""
    p, k = tb.p, tb.k
    kp, banks = p["k_par"], p["b_banks"]
    copies = kp // banks
    wanted = {(lane, bank, copy) for lane in range(min(kp, k)) for bank in range(banks)
              for copy in range(copies) if route_reachable(p, lane, bank, copy)}
    pool = []
    for lane, bank, copy in sorted(wanted):
        for x in range(lane, k):
            same = [y for y in range(x) if y % banks == bank]
            other = [y for y in range(x) if y % banks != bank]
            counts = [n for n in range(max(0, lane - len(other)), min(lane, len(same)) + 1)
                      if n % copies == copy]
            if x % banks == bank and counts:
                pool.append([x, *tb.np_rng.permutation(same)[:counts[0]],
                             *tb.np_rng.permutation(other)[:lane - counts[0]]])
                break
    for _ in range(candidates):
        pool.append(np.flatnonzero(tb.np_rng.random(k) < tb.np_rng.random()).tolist())
    routes = [row_routes(p, cols) for cols in pool]
    rows, left = [], set(wanted)
    while left:
        best = max(range(len(pool)), key=lambda i: len(routes[i] & left))
        assert routes[best] & left, f"routes {sorted(left)} taken by no candidate row"
        left -= routes[best]
        row = np.zeros(k, dtype=np.uint64)
        row[pool[best]] = random_elements(tb.np_rng, len(pool[best]), tb.width, 1.0)
        rows.append(row)
    return np.array(rows, dtype=np.uint64).reshape(-1, k)


@cocotb.test()
async def random_traffic(dut):
    """Random tiles (1..max_rows rows, densities 0..1), B reloaded between and during tiles,
    random idle on every input and random back-pressure on C."""
    tb = GemmTB(dut)
    await tb.start(idle=tb.args.get("idle", 0.3), backpressure=tb.args.get("backpressure", 0.3))
    tb.load_b()
    await tb.b_loaded()
    for i in range(tb.args.get("tiles", 12)):
        tb.tile(extreme=tb.rng.random() < 0.2)
        if tb.rng.random() < 0.3:
            tb.load_b(extreme=tb.rng.random() < 0.3)   # queued now: lands mid-tile or between
    await tb.finish()


@cocotb.test()
async def edge_tiles(dut):
    """One-row and 70-row tiles, all-zero and all-dense tiles, single nonzeros at the first and
    last column, extreme values that wrap the accumulators, a B reload between tiles, and a tile
    whose data ``tlast`` are all wrong (ignored, flagged on ``err_a_stream``; in the dense-only
    variant its masks are the sparse ones too, ignored and flagged)."""
    tb = GemmTB(dut)
    await tb.start(idle=0.2, backpressure=0.2)
    tb.load_b(extreme=True)
    await tb.b_loaded()
    tb.tile(_edge_rows(tb))
    if tb.p["sparse"]:   # every (lane, bank, copy) read route; dense-only rows take one each
        tb.tile(route_rows(tb))
    tb.tile(rows=1, density=1.0, extreme=True)
    tb.tile(rows=1, density=0.0)
    tb.tile(rows=tb.args.get("long_rows", 70), density=tb.rng.random())
    await tb.finish()
    tb.load_b()
    await tb.b_loaded()
    tb.tile(rows=3, density=1.0, extreme=True)
    tb.tile(_edge_rows(tb), bad_data_last=True)
    tb.tile(rows=5, density=0.0)
    await tb.finish()


@cocotb.test()
async def alternating_rows(dut):
    """Full rows alternating with rows of every data-beat count (1 .. k/lanes beats): the next
    row's load ends while the other slot still computes a full row, at each beat position of
    the loader (fault injection found a slot entry written without a data transfer unseen)."""
    tb = GemmTB(dut)
    await tb.start(idle=0.2, backpressure=0.2)
    tb.load_b()
    await tb.b_loaded()
    k, lanes = tb.k, tb.lanes
    rows = []
    for beats in range(1, k // lanes + 1):
        rows.append(tb.random_matrix((1, k), 1.0)[0])
        nnz = min(k, (beats - 1) * lanes + tb.rng.randint(1, lanes))
        row = np.zeros(k, dtype=np.uint64)
        cols = tb.np_rng.permutation(k)[:nnz]
        row[cols] = random_elements(tb.np_rng, nnz, tb.width, 1.0)
        rows.append(row)
    tb.tile(np.array(rows))
    await tb.finish()


@cocotb.test()
async def reset_mid_tile(dut):
    """Reset while a tile is half out (B loaded, C held back at random): afterwards the next B
    and tiles are computed from a clean state (slots, FIFO, credits, B write pointer)."""
    tb = GemmTB(dut)
    await tb.start()
    tb.load_b()
    await tb.b_loaded()
    tb.tile(rows=8, density=0.7)
    half = 4 * tb.n // tb.lanes
    await tb.bench.wait_until(lambda: len(tb.sink.beats) >= half, timeout=100 * tb.k * tb.n,
                              what="half of a tile")
    tb.load_b()   # a B packet cut short by the reset as well
    for _ in range(3):
        await FallingEdge(tb.bench.clk)
    tb.stop()
    c = gemm(tb.tiles[0], tb.b_packets[0], width=tb.width, signed=tb.signed,
             acc_width=tb.acc_width).reshape(-1)
    got = [b.data for b in tb.sink.beats]
    want = [pack_beat(c[i * tb.lanes:(i + 1) * tb.lanes], tb.acc_width) for i in range(len(got))]
    check_sequence("m_axis_c before the reset", got, want)
    tb.b_packets, tb.tiles, tb.tile_masks = [], [], []
    await tb.start()
    tb.load_b()
    await tb.b_loaded()
    tb.tile(rows=5)
    tb.tile(rows=3, density=1.0)
    await tb.finish()


@cocotb.test()
async def timing(dut):
    """Inputs always valid, output always ready: every tile's cycles (first mask transfer to
    last C beat) equal the cycle model, tile by tile in isolation and back to back."""
    tb = GemmTB(dut)
    await tb.start(idle=0.0, backpressure=0.0)
    tb.load_b()
    await tb.b_loaded()
    densities = tb.args.get("densities", [0.0, 0.05, 0.3, 0.6, 1.0])
    rows = tb.args.get("rows", 9)
    # In isolation: each tile into an idle datapath.
    for density in densities:
        start = len(tb.tiles)
        tb.tile(rows=rows, density=density)
        await tb.finish()
        _compare_cycles(tb, start)
    tb.tile(_edge_rows(tb))
    start = len(tb.tiles) - 1
    await tb.finish()
    _compare_cycles(tb, start)
    if tb.sets > 1:
        return   # back to back, each tile waits for its chunk: ``hidden_loads`` times that
    # Back to back: one model run over the whole sequence.
    start = len(tb.tiles)
    for density in densities:
        tb.tile(rows=tb.rng.randint(1, rows), density=density)
    tb.tile(rows=2, density=0.0)
    tb.tile(rows=2, density=1.0)
    await tb.finish()
    _compare_cycles(tb, start)


@cocotb.test(skip=test_args().get("hidden") is None)
async def hidden_loads(dut):
    """Two weight sets: tiles back to back, each tile's ``B`` chunk queued before it, inputs
    always valid and the output always ready. Every tile has at least as many passes as a chunk
    has beats, so each chunk loads while the tile before computes: every tile's first mask and
    last ``C`` beat are where the model (which loads no ``B``) puts them, the loads hidden;
    and some ``B`` beats transferred while a tile was being received."""
    tb = GemmTB(dut)
    if tb.sets == 1:
        dut._log.info("hidden_loads: one weight set, nothing to hide (the loads wait by design)")
        return
    await tb.start(idle=0.0, backpressure=0.0)
    tb.load_b()
    await tb.b_loaded()
    chunk_beats = tb.k * tb.n // tb.lanes
    rows = -(-chunk_beats // tb.k) + 2
    start = len(tb.tiles)
    for density in tb.args["hidden"]:
        # The next chunk loads from this tile's start; the loader may take the next tile's
        # first mask once the rows before this tile's last two have issued.
        a_raw = tb.random_matrix((4 * rows, tb.k), density)
        masks = [m for m, _ in encode_tile(a_raw, lanes=tb.lanes, width=tb.width,
                                           number_format="int").masks]
        passes = sum(row_passes(m, tb.timing)[0] for m in masks[:-2])
        assert passes >= chunk_beats + 8, f"{passes} passes cannot hide {chunk_beats} beats"
        tb.tile(a_raw)
    await tb.finish()
    _compare_cycles(tb, start)
    row, inside = 0, 0
    for t in tb.tiles:
        first, last = tb.src_mask.sent_cycles[row], tb.src_mask.sent_cycles[row + len(t) - 1]
        row += len(t)
        inside += sum(first <= c <= last for c in tb.src_b.sent_cycles)
    assert inside > 0, "no B beat transferred while a tile was being received"


def _compare_cycles(tb, start):
    """Tiles ``start..`` were sent back to back into an idle datapath: compare every tile's
    first-mask and last-C cycles with the model, relative to the first tile's first mask."""
    masks = tb.tile_masks[start:]
    model = simulate(masks, tb.timing)
    row0 = sum(len(t) for t in tb.tiles[:start])
    beats0 = row0 * tb.n // tb.lanes
    origin = tb.src_mask.sent_cycles[row0]
    row, beat = row0, beats0
    for i, (tile, predicted) in enumerate(zip(tb.tiles[start:], model)):
        first = tb.src_mask.sent_cycles[row] - origin
        beat += len(tile) * tb.n // tb.lanes
        last = tb.sink.beat_cycles[beat - 1] - origin
        row += len(tile)
        got = (first, last)
        want = (predicted.first_mask, predicted.last_c)
        assert got == want, (f"tile {start + i} ({len(tile)} rows): first mask / last C at "
                             f"{got}, cycle model {want}")


@cocotb.test(skip=test_args().get("bench") is None)
async def bench(dut):
    """Benchmark (``spartan bench gemm``): one tile per density, as ZVC and as all-ones masks
    (dense bypass form), inputs always valid, output always ready; cycles and statistics
    strobes per tile, written to ``bench.json``."""
    import json
    tb = GemmTB(dut)
    await tb.start(idle=0.0, backpressure=0.0)
    tb.load_b()
    await tb.b_loaded()
    rows_out = []
    m = tb.args["rows"]
    for density in tb.args["bench"]:
        a_raw = tb.random_matrix((m, tb.k), density)
        entry = {"density": density}
        for mode in ("sparse", "dense"):
            start = len(tb.tiles)
            if mode == "sparse":
                tb.tile(a_raw)
            else:
                _dense_tile(tb, a_raw)
            n_issue, n_conf = len(tb.stats["issue"]), len(tb.stats["conflict"])
            n_macs = len(tb.stats["macs"])
            await tb.finish()
            row0 = sum(len(t) for t in tb.tiles[:start])
            first = tb.src_mask.sent_cycles[row0]
            last = tb.sink.beat_cycles[-1]
            model = simulate(tb.tile_masks[start:], tb.timing)[0]
            entry[mode] = {
                "cycles": last - first + 1,
                "model_cycles": model.cycles,
                "passes": len(tb.stats["issue"]) - n_issue,
                "conflict_cycles": len(tb.stats["conflict"]) - n_conf,
                "useful_macs": sum(v for _, v in tb.stats["macs"][n_macs:]),
                "nnz": int((a_raw != 0).sum()),
            }
            if mode == "sparse":
                # Passes a perfect packer would need (nnz / k_par per column group), and the
                # passes lost to partial groups (a row's nnz not a multiple of k_par; an empty
                # row's single pass counts here too).
                t = tb.timing
                nnz_rows = [int((r != 0).sum()) for r in a_raw]
                ideal = t.col_groups * sum(nnz_rows) / t.k_par
                partial = sum(t.col_groups * (-(-z // t.k_par) - z / t.k_par) if z else 1
                              for z in nnz_rows)
                entry[mode].update({"ideal_passes": ideal, "partial_passes": partial})
        rows_out.append(entry)
    with open("bench.json", "w") as f:
        json.dump({"params": tb.p, "rows": m, "results": rows_out}, f)


def _dense_tile(tb, a_raw):
    """``a_raw`` in dense-bypass form: all-ones masks, every element (zeros too) as data."""
    a_raw = np.asarray(a_raw, dtype=np.uint64)
    enc = encode_tile(a_raw, lanes=tb.lanes, width=tb.width, number_format="int", bypass=True)
    tb.tiles.append(a_raw)
    tb.tile_masks.append([m for m, _ in enc.masks])
    tb.src_mask.send([Beat(m, last) for m, last in enc.masks])
    tb.src_data.send([Beat(d, last) for d, last in enc.data])


# --- the verification profile (verif/tb/profile.py) ------------------------------------------

def _route_unreachable(text, p):
    """A select arm ``? \\...g_val<lane> : 0`` of ``a_bank<b>_copy<c>`` (for an address
    line: of the data select it shares its condition with) that no row can take."""
    m = re.search(r"\? \\\S*g_val(\d+) +: \d+'h0+;.*=> \S*a_bank(\d+)_copy(\d+)$", text)
    if not m or not text.startswith("[cond_then]"):
        return False
    return not route_reachable(p, int(m[1]), int(m[2]), int(m[3]))


def _lane_below_index(text, p):
    """``? N'hJ : N'h0`` driving ``lane<L>_idx`` with J < L."""
    m = re.search(r"\? \d+'h([0-9a-f]+) : \d+'h0+;.*=> \S*lane(\d+)_idx( |$)", text)
    return bool(m) and int(m[1], 16) < int(m[2])


#: Also the core's (verif/tb/tb_core.py): the same GEMM inside.
EMBEDDED_WAIVERS = (
    Waiver(_lane_below_index, None,
           "data lane l never carries a column below l (a column's rank is at most its index), so "
           "this arm of lane l's column encoder is unreachable (Yosys cannot prove it constant)"),
    Waiver(_route_unreachable, None,
           "no row routes lane l to this (bank, copy): lane l holds a column x >= l, and its copy "
           "is (valid lanes below it in bank x mod b_banks) mod copies, which no choice of the "
           "lanes below can make this one (checked over every column, `route_reachable`)"),
)

PROFILE = Profile(
    # Besides the defaults, each beside its dense-only twin (added by the flow): the replicated
    # datapath at the same 64 multipliers (the previous default, the second design of
    # docs/gemm.md) and the broadcast one at double width.
    synth_sizes=({"sparse": False}, {"k_par": 4, "n_par": 16}, {"n": 128, "n_par": 128}),
    mutants=20,
    mutant_tests=(["random_traffic", "edge_tiles", "alternating_rows", "reset_mid_tile", "timing",
                   "hidden_loads"],
                  {"tiles": 12, "max_rows": 12, "rows": 9, "long_rows": 70,
                   "hidden": [1.0, 0.5, 0.3]}),
    # At the defaults one column group (n = n_par) leaves the logic of several dead: four here;
    # and K over 64 the row loader's wider mask chunks (the defaults' are 8 bits, K = 64).
    # ``sets``: the two weight sets' logic (chunk counters, set bits), with column groups.
    mutant_configs=(("live", {"n_par": 16, "k": 128}),
                    ("sets", {"n_par": 16, "n": 32, "k": 32, "weight_sets": 2})),
    fuzz_examples=12,
    coverage_waivers=EMBEDDED_WAIVERS + (
        Waiver(r"=> \S*(a_bank\d+_copy\d+|\$signature__addr)",
               lambda p: p["b_banks"] == 1 and not p["sparse"],
               "dense-only, one bank: every group is full, so lane l is always valid and always "
               "reads copy l mod copies; this select arm (another lane, or an idle copy) is "
               "unreachable"),
        Waiver(r"(\\core\.head \[\d+\]|\\core\.final ).*"
               r"=> (core\.final|core\.o_beat|m_axis_c_tdata)",
               lambda p: not p["sparse"] and p["n_par"] == p["lanes"],
               "dense-only with n_par = lanes: no row takes the all-zero shortcut (head.zero is "
               "never set) and a C word is one beat, so every beat is final"),
        Waiver(r"\\core\.b_sub .*=> core\.b_(row|cg|sub)$", lambda p: p["n_par"] == p["lanes"],
               "n_par = lanes: a B word is one beat, so b_sub stays 0"),
    ),
)
