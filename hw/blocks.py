"""Registry of every block the generator knows, in dependency order."""

from . import compactor, core, engine, expander, gemm, monitor

BLOCKS = {b.name: b for b in (monitor.BLOCK, compactor.BLOCK, expander.BLOCK, gemm.BLOCK,
                                     core.BLOCK, engine.BLOCK)}


def get(name):
    if name not in BLOCKS:
        known = ", ".join(BLOCKS)
        raise ValueError(f"block must be one of {known}, not {name!r}")
    return BLOCKS[name]
