/* Spartan core driver: see spartan_core.h. Every register access goes through the user's
   rd/wr hooks at core->base + the offset the generated header gives. */
#include "spartan_core.h"

/* Byte offset of a register of the REGS block, of word 0 of a table entry. */
#define REG(name) ((uintptr_t)offsetof(spartan_core_t, REGS.name))
#define ENTRY(index) \
    ((uintptr_t)offsetof(spartan_core_t, DENSITY_TABLE.ENTRY) \
     + (uintptr_t)(index) * sizeof(((spartan_core_t *)0)->DENSITY_TABLE.ENTRY[0]))

/* A field's value within a register or entry value, by its generated _bm/_bp macros. */
#define FIELD(value, prefix) ((uint32_t)(((value) & (prefix##_bm)) >> (prefix##_bp)))

static uint32_t rd(const struct spartan_core *core, uintptr_t offset)
{
    return core->rd(core->base + offset);
}

static void wr(const struct spartan_core *core, uintptr_t offset, uint32_t value)
{
    core->wr(core->base + offset, value);
}

/* CTRL with MODE unchanged and one-shot command bits set (they read back 0, so a read gives
   MODE alone). */
static void command(const struct spartan_core *core, uint32_t commands)
{
    uint32_t mode = rd(core, REG(CTRL)) & SPARTAN_CORE__REGS__CTRL__MODE_bm;
    wr(core, REG(CTRL), mode | commands);
}

/* Entries [table_base, table_base + tiles) lie inside the table (written to avoid overflow). */
static int slice_fits(unsigned table_base, unsigned tiles)
{
    return table_base <= SPARTAN_CORE_TABLE_DEPTH && tiles <= SPARTAN_CORE_TABLE_DEPTH - table_base;
}

int spartan_core_init(struct spartan_core *core, uintptr_t base, spartan_core_rd_fn rd_hook,
                      spartan_core_wr_fn wr_hook)
{
    core->base = base;
    core->rd = rd_hook;
    core->wr = wr_hook;
    if (rd(core, REG(ID)) != SPARTAN_CORE__REGS__ID__ID_reset)
        return SPARTAN_CORE_ERR_ID;
    return SPARTAN_CORE_OK;
}

int spartan_core_set_threshold(const struct spartan_core *core, unsigned threshold)
{
    if (threshold > (SPARTAN_CORE__REGS__THRESHOLD__THRESHOLD_bm
                     >> SPARTAN_CORE__REGS__THRESHOLD__THRESHOLD_bp))
        return SPARTAN_CORE_ERR_RANGE;
    wr(core, REG(THRESHOLD), (uint32_t)threshold << SPARTAN_CORE__REGS__THRESHOLD__THRESHOLD_bp);
    return SPARTAN_CORE_OK;
}

unsigned spartan_core_get_threshold(const struct spartan_core *core)
{
    return FIELD(rd(core, REG(THRESHOLD)), SPARTAN_CORE__REGS__THRESHOLD__THRESHOLD);
}

int spartan_core_set_mode(const struct spartan_core *core, enum spartan_core_mode mode)
{
    if (mode != SPARTAN_CORE_MODE_AUTO && mode != SPARTAN_CORE_MODE_DENSE
        && mode != SPARTAN_CORE_MODE_SPARSE)
        return SPARTAN_CORE_ERR_RANGE;
    wr(core, REG(CTRL), (uint32_t)mode << SPARTAN_CORE__REGS__CTRL__MODE_bp);
    return SPARTAN_CORE_OK;
}

enum spartan_core_mode spartan_core_get_mode(const struct spartan_core *core)
{
    /* MODE 3 is reserved and behaves as force dense. */
    uint32_t mode = FIELD(rd(core, REG(CTRL)), SPARTAN_CORE__REGS__CTRL__MODE);
    return mode == SPARTAN_CORE_MODE_AUTO ? SPARTAN_CORE_MODE_AUTO
         : mode == SPARTAN_CORE_MODE_SPARSE ? SPARTAN_CORE_MODE_SPARSE : SPARTAN_CORE_MODE_DENSE;
}

void spartan_core_clear_counters(const struct spartan_core *core)
{
    command(core, SPARTAN_CORE__REGS__CTRL__CLEAR_bm);
}

void spartan_core_forget_history(const struct spartan_core *core)
{
    command(core, SPARTAN_CORE__REGS__CTRL__FORGET_bm);
}

void spartan_core_start_pass(const struct spartan_core *core)
{
    command(core, SPARTAN_CORE__REGS__CTRL__PASS_START_bm);
}

int spartan_core_select_layer(const struct spartan_core *core, unsigned table_base,
                              unsigned tiles)
{
    if (!slice_fits(table_base, tiles))
        return SPARTAN_CORE_ERR_RANGE;
    wr(core, REG(TABLE_BASE),
       (uint32_t)table_base << SPARTAN_CORE__REGS__TABLE_BASE__TABLE_BASE_bp);
    return SPARTAN_CORE_OK;
}

uint32_t spartan_core_tile(const struct spartan_core *core)
{
    return rd(core, REG(TILE));
}

int spartan_core_read_entry(const struct spartan_core *core, unsigned index,
                            struct spartan_core_entry *entry)
{
    uint64_t value;
    if (index >= SPARTAN_CORE_TABLE_DEPTH)
        return SPARTAN_CORE_ERR_RANGE;
    /* Word 0 holds the entry's low 32 bits (the RDL's accesswidth = 32, little-endian). */
    value = rd(core, ENTRY(index));
    value |= (uint64_t)rd(core, ENTRY(index) + 4) << 32;
    entry->valid = FIELD(value, SPARTAN_CORE__DENSITY_TABLE__ENTRY__VALID) != 0;
    entry->nnz = FIELD(value, SPARTAN_CORE__DENSITY_TABLE__ENTRY__NNZ);
    entry->elems = FIELD(value, SPARTAN_CORE__DENSITY_TABLE__ENTRY__ELEMS);
    return SPARTAN_CORE_OK;
}

int spartan_core_read_layer(const struct spartan_core *core, unsigned table_base, unsigned tiles,
                            struct spartan_core_entry *entries)
{
    unsigned t;
    if (!slice_fits(table_base, tiles))
        return SPARTAN_CORE_ERR_RANGE;
    for (t = 0; t < tiles; t++)
        spartan_core_read_entry(core, table_base + t, &entries[t]);
    return SPARTAN_CORE_OK;
}

void spartan_core_read_counters(const struct spartan_core *core,
                                struct spartan_core_counters *counters)
{
    counters->cycles = rd(core, REG(CYCLES));
    counters->busy_cycles = rd(core, REG(BUSY_CYCLES));
    counters->stall_cycles = rd(core, REG(STALL_CYCLES));
    counters->tiles_dense = rd(core, REG(TILES_DENSE));
    counters->tiles_sparse = rd(core, REG(TILES_SPARSE));
    counters->rows_empty = rd(core, REG(ROWS_EMPTY));
    counters->macs_done = rd(core, REG(MACS_DONE));
    counters->macs_skipped = rd(core, REG(MACS_SKIPPED));
    counters->conflict_cycles = rd(core, REG(CONFLICT_CYCLES));
    counters->zero_beats = rd(core, REG(ZERO_BEATS));
    counters->tiles_below = rd(core, REG(TILES_BELOW));
    counters->a_errors = rd(core, REG(A_ERRORS));
}

int spartan_core_entry_sparse(const struct spartan_core_entry *entry, unsigned threshold)
{
    return entry->valid && (uint64_t)entry->nnz * 256u <= (uint64_t)threshold * entry->elems;
}
