"""Placement: a size and its dense-only twins placed on the first device of their family that
takes them all, each with placement seeds 1..N under the clock constraint, and the report
entries that come of it (older, single-seed entries brought to the current layout)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from .families import ASIC, FAMILIES, Family

TARGET_MHZ = 100.0              # nextpnr's clock constraint (--freq)
SEEDS = 3                       # placement seeds 1..N of each size (--seeds)


def fmax_stats(seeds):
    """``(mean, min, max)`` of the seeds' Fmax (MHz); ``None``s if any seed is untimed."""
    values = [s["fmax_mhz"] for s in seeds]
    if not values or any(v is None for v in values):
        return None, None, None
    return statistics.fmean(values), min(values), max(values)


def over_capacity(device, needs):
    """The resources of which ``needs`` (LUT/FF/BRAM/DSP counts) wants more than ``device``
    has; the harness's flip-flops (``harness_ffs``) count as FFs."""
    want = dict(needs, ff=needs["ff"] + needs.get("harness_ffs", 0))
    return [k for k, cap in device.capacity.items() if want[k] > cap]


def _unplaced(entry, freq):
    return dict(entry, target_mhz=freq, fits=False, device=None, reason=None, seeds=[],
                fmax_mhz=None, fmax_min=None, fmax_max=None, critical_path=None,
                utilisation={})


def _capable_device(family, first, entries):
    """The index of the first device of ``family`` from ``first`` on that has the capacity of
    every one of ``entries`` (a size and its twins), each entry's ``reason`` saying why the
    ones before it do not; ``None`` if none has."""
    for index in range(first, len(family.devices)):
        device = family.devices[index]
        over = [over_capacity(device, e) for e in entries]
        if not any(over):
            return index
        for entry, short in zip(entries, over):
            entry["reason"] = (f"{device.name}: needs more {'/'.join(short)} than the device "
                               f"has" if short else f"{device.name}: its twin does not fit")
    return None


def _placed(entry, device, row):
    mean, low, high = fmax_stats(row)
    slowest = min(row, key=lambda s: s["fmax_mhz"] or 0.0)
    entry.update(fits=True, device=device.name, reason=None,
                 seeds=[{k: s[k] for k in ("seed", "fmax_mhz", "critical_path", "seconds")}
                        for s in row],
                 fmax_mhz=mean, fmax_min=low, fmax_max=high,
                 critical_path=dict(slowest["critical_path"] or {}, seed=slowest["seed"]),
                 utilisation=row[0]["utilisation"],
                 bram_output_registers=row[0].get("bram_output_registers"))


@dataclass
class _Group:
    """A size and its twins being placed: the device of ``family`` they try next."""

    family: Family
    entries: list
    device: int = 0


def place_groups(groups, place, seeds=SEEDS, freq=TARGET_MHZ):
    """Place and route each group, ``(family name, [netlist entry])`` (a size and its twins),
    on the first device of the family that takes all of its members, each with seeds
    1..``seeds``. ``place([(entry, device, seed)])`` places one round, every group's next
    device at once: for each, a ``place_seed`` result or the reason (a string) it failed.

    Returns ``(entries, failures)``: the report entries of the members placed, or placed
    nowhere (``fits`` False and the reason), and ``(netlist entry, job, reason)`` of each
    member one of whose placements failed (its twins are reported without it)."""
    pending = [_Group(FAMILIES[family], [_unplaced(e, freq) for e in members])
               for family, members in groups]
    entries, failures = [], []
    while pending:
        placing, asks = [], []
        for group in pending:
            group.device = _capable_device(group.family, group.device, group.entries)
            if group.device is None:
                entries += group.entries
                continue
            placing.append(group)
            device = group.family.devices[group.device]
            asks += [(e, device, seed) for e in group.entries for seed in range(1, seeds + 1)]
        results = iter(place(asks) if asks else ())
        pending = []
        for group in placing:
            device = group.family.devices[group.device]
            rows = [[next(results) for _ in range(seeds)] for _ in group.entries]
            misfit = next((r for row in rows for r in row
                           if not isinstance(r, str) and not r["fits"]), None)
            if misfit is not None:       # all of the group move on to the next device
                for entry in group.entries:
                    entry["reason"] = misfit["reason"]
                group.device += 1
                pending.append(group)
                continue
            for entry, row in zip(group.entries, rows):
                failed = [(seed, r) for seed, r in enumerate(row, 1) if isinstance(r, str)]
                if failed:
                    seed, reason = failed[0]
                    failures.append((entry, f"place and route on {device.name} seed {seed}",
                                     reason))
                else:
                    _placed(entry, device, row)
                    entries.append(entry)
    return entries, failures


def _normalise(entry, seed):
    """An entry of an earlier, single-seed flow in the current layout (its one seed)."""
    if entry["family"] == ASIC or "seeds" in entry:
        return entry
    one = [{"seed": seed, "fmax_mhz": entry["fmax_mhz"],
            "critical_path": entry.get("critical_path")}] if entry["fits"] else []
    return dict(entry, seeds=one, fmax_min=entry["fmax_mhz"], fmax_max=entry["fmax_mhz"])


def normalised(doc):
    """``doc`` with every entry in the current layout (a record may predate the seeds)."""
    return dict(doc, runs=[_normalise(r, doc.get("seed", 1)) for r in doc.get("runs", [])])
