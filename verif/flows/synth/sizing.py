"""The sizes a block is synthesised at: its declared ones (or half and double its ``lanes``),
each sparse size beside its dense-only twin; a size's tag (the name of its work folder and of its
report rows), and the parameters a family's builds add."""

from __future__ import annotations


def has_twin(block):
    """Whether ``block`` has a dense-only build to be compared with (a ``sparse`` parameter)."""
    return any(p.name == "sparse" for p in block.params)


def pair_key(changed):
    """What a size and its dense-only twin share: every override but ``sparse``."""
    return tuple(sorted((k, v) for k, v in changed.items() if k != "sparse"))


def with_twins(chosen, default_sparse=True):
    """``chosen`` with each sparse size followed by its dense-only twin where none is listed."""
    listed = {(pair_key(s), s.get("sparse", default_sparse)) for s in chosen}
    out = []
    for size in chosen:
        out.append(size)
        if size.get("sparse", default_sparse) and (pair_key(size), False) not in listed:
            out.append({**size, "sparse": False})
            listed.add((pair_key(size), False))
    return out


def pair_groups(chosen):
    """``chosen`` cut into groups placed on one device: a size and its twins, in order."""
    groups = {}
    for size in chosen:
        groups.setdefault(pair_key(size), []).append(size)
    return list(groups.values())


def sizes(block, explicit=None):
    """Parameter overrides to synthesise: ``explicit`` alone, or ``{}`` (the defaults) first,
    then its profile's ``synth_sizes`` or half and double its default ``lanes``; for a block
    with a dense-only build, every sparse size followed by its twin."""
    if explicit is not None:
        chosen = [dict(explicit)]
    else:
        from spartan_rtl.tb import profile
        declared = profile.of(block.name).synth_sizes
        chosen = [{}] + [dict(s) for s in declared] if declared is not None else _lanes_sizes(block)
    if has_twin(block):
        chosen = with_twins(chosen, block.resolve()["sparse"])
    return chosen


def _lanes_sizes(block):
    chosen = [{}]
    if any(p.name == "lanes" for p in block.params):
        lanes = block.resolve()["lanes"]
        for value in (lanes // 2, lanes * 2):
            try:
                block.resolve({"lanes": value})
            except (TypeError, ValueError):
                continue
            chosen.append({"lanes": value})
    return chosen


def _tag(changed):
    return ",".join(f"{k}={v}" for k, v in sorted(changed.items())) or "defaults"


def family_values(block, changed, family):
    """The family's :attr:`Family.values` this block at this size takes: those it has, not
    set by the size, and valid with it."""
    names = {q.name for q in block.params}
    values = {k: v for k, v in family.values if k in names and k not in changed}
    try:
        block.resolve({**changed, **values})
    except (TypeError, ValueError):
        return {}
    return values
