"""Registry of every block the generator knows, in dependency order."""

from . import compactor, core, engine, expander, gemm, monitor
from .params import not_one_of

BLOCKS = {b.name: b for b in (monitor.BLOCK, compactor.BLOCK, expander.BLOCK, gemm.BLOCK,
                                     core.BLOCK, engine.BLOCK)}


def get(name):
    if name not in BLOCKS:
        raise ValueError(not_one_of("block", name, BLOCKS))
    return BLOCKS[name]
