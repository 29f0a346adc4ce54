/* Spartan layer engine driver: see spartan_engine.h. Every register access goes through the
   user's rd/wr hooks at eng->base + the offset the generated header gives. */
#include "spartan_engine.h"

/* Byte offset of a register of the REGS block, of word 0 of a table entry. */
#define REG(name) ((uintptr_t)offsetof(spartan_engine_t, REGS.name))
#define ENTRY(index) \
    ((uintptr_t)offsetof(spartan_engine_t, DENSITY_TABLE.ENTRY) \
     + (uintptr_t)(index) * sizeof(((spartan_engine_t *)0)->DENSITY_TABLE.ENTRY[0]))

/* A field's value within a register or entry value, by its generated _bm/_bp macros; the
   largest value a field holds. */
#define FIELD(value, prefix) ((uint32_t)(((value) & (prefix##_bm)) >> (prefix##_bp)))
#define FIELD_MAX(prefix) ((uint32_t)((prefix##_bm) >> (prefix##_bp)))

static uint32_t rd(const struct spartan_engine *eng, uintptr_t offset)
{
    return eng->rd(eng->base + offset);
}

static void wr(const struct spartan_engine *eng, uintptr_t offset, uint32_t value)
{
    eng->wr(eng->base + offset, value);
}

/* CTRL with MODE unchanged and one-shot command bits set (they read back 0, so a read gives
   MODE alone). */
static void command(const struct spartan_engine *eng, uint32_t commands)
{
    uint32_t mode = rd(eng, REG(CTRL)) & SPARTAN_ENGINE__REGS__CTRL__MODE_bm;
    wr(eng, REG(CTRL), mode | commands);
}

static uint64_t chunks(uint32_t count, unsigned size)
{
    return ((uint64_t)count + size - 1) / size;
}

int spartan_engine_init(struct spartan_engine *eng, uintptr_t base, spartan_engine_rd_fn rd_hook,
                        spartan_engine_wr_fn wr_hook)
{
    eng->base = base;
    eng->rd = rd_hook;
    eng->wr = wr_hook;
    if (rd(eng, REG(ID)) != SPARTAN_ENGINE__REGS__ID__ID_reset)
        return SPARTAN_ENGINE_ERR_ID;
    return SPARTAN_ENGINE_OK;
}

int spartan_engine_set_threshold(const struct spartan_engine *eng, unsigned threshold)
{
    if (threshold > FIELD_MAX(SPARTAN_ENGINE__REGS__THRESHOLD__THRESHOLD))
        return SPARTAN_ENGINE_ERR_RANGE;
    wr(eng, REG(THRESHOLD),
       (uint32_t)threshold << SPARTAN_ENGINE__REGS__THRESHOLD__THRESHOLD_bp);
    return SPARTAN_ENGINE_OK;
}

unsigned spartan_engine_get_threshold(const struct spartan_engine *eng)
{
    return FIELD(rd(eng, REG(THRESHOLD)), SPARTAN_ENGINE__REGS__THRESHOLD__THRESHOLD);
}

int spartan_engine_set_mode(const struct spartan_engine *eng, enum spartan_engine_mode mode)
{
    if (mode != SPARTAN_ENGINE_MODE_AUTO && mode != SPARTAN_ENGINE_MODE_DENSE
        && mode != SPARTAN_ENGINE_MODE_SPARSE)
        return SPARTAN_ENGINE_ERR_RANGE;
    wr(eng, REG(CTRL), (uint32_t)mode << SPARTAN_ENGINE__REGS__CTRL__MODE_bp);
    return SPARTAN_ENGINE_OK;
}

enum spartan_engine_mode spartan_engine_get_mode(const struct spartan_engine *eng)
{
    /* MODE 3 is reserved and behaves as force dense. */
    uint32_t mode = FIELD(rd(eng, REG(CTRL)), SPARTAN_ENGINE__REGS__CTRL__MODE);
    return mode == SPARTAN_ENGINE_MODE_AUTO ? SPARTAN_ENGINE_MODE_AUTO
         : mode == SPARTAN_ENGINE_MODE_SPARSE ? SPARTAN_ENGINE_MODE_SPARSE
         : SPARTAN_ENGINE_MODE_DENSE;
}

void spartan_engine_clear_counters(const struct spartan_engine *eng)
{
    command(eng, SPARTAN_ENGINE__REGS__CTRL__CLEAR_bm);
}

void spartan_engine_forget_history(const struct spartan_engine *eng)
{
    command(eng, SPARTAN_ENGINE__REGS__CTRL__FORGET_bm);
}

int spartan_engine_set_table_base(const struct spartan_engine *eng, unsigned table_base)
{
    if (table_base >= SPARTAN_ENGINE_TABLE_DEPTH)
        return SPARTAN_ENGINE_ERR_RANGE;
    wr(eng, REG(TABLE_BASE),
       (uint32_t)table_base << SPARTAN_ENGINE__REGS__TABLE_BASE__TABLE_BASE_bp);
    return SPARTAN_ENGINE_OK;
}

unsigned spartan_engine_get_table_base(const struct spartan_engine *eng)
{
    return FIELD(rd(eng, REG(TABLE_BASE)), SPARTAN_ENGINE__REGS__TABLE_BASE__TABLE_BASE);
}

void spartan_engine_set_irq_enable(const struct spartan_engine *eng, int enable)
{
    wr(eng, REG(IRQ_EN), (uint32_t)(enable != 0) << SPARTAN_ENGINE__REGS__IRQ_EN__IRQ_EN_bp);
}

int spartan_engine_run_layer(const struct spartan_engine *eng, unsigned op, uint32_t m,
                             uint32_t k, uint32_t n, uint32_t a_addr, uint32_t a_stride,
                             uint32_t b_addr, uint32_t b_stride, uint32_t c_addr,
                             uint32_t c_stride)
{
    if (op > FIELD_MAX(SPARTAN_ENGINE__REGS__OP__OP))
        return SPARTAN_ENGINE_ERR_RANGE;
    if (spartan_engine_busy(eng))
        return SPARTAN_ENGINE_ERR_BUSY;
    /* The engine copies the descriptor at START: the registers may be rewritten for the next
       layer as soon as this one runs. */
    wr(eng, REG(OP), (uint32_t)op << SPARTAN_ENGINE__REGS__OP__OP_bp);
    wr(eng, REG(M), m);
    wr(eng, REG(K), k);
    wr(eng, REG(N), n);
    wr(eng, REG(A_ADDR), a_addr);
    wr(eng, REG(A_STRIDE), a_stride);
    wr(eng, REG(B_ADDR), b_addr);
    wr(eng, REG(B_STRIDE), b_stride);
    wr(eng, REG(C_ADDR), c_addr);
    wr(eng, REG(C_STRIDE), c_stride);
    command(eng, SPARTAN_ENGINE__REGS__CTRL__START_bm);
    return SPARTAN_ENGINE_OK;
}

int spartan_engine_busy(const struct spartan_engine *eng)
{
    return FIELD(rd(eng, REG(STATUS)), SPARTAN_ENGINE__REGS__STATUS__BUSY) != 0;
}

int spartan_engine_done(const struct spartan_engine *eng)
{
    return FIELD(rd(eng, REG(STATUS)), SPARTAN_ENGINE__REGS__STATUS__DONE) != 0;
}

unsigned spartan_engine_code(const struct spartan_engine *eng)
{
    return FIELD(rd(eng, REG(ERR_CODE)), SPARTAN_ENGINE__REGS__ERR_CODE__ERR_CODE);
}

unsigned spartan_engine_wait(const struct spartan_engine *eng)
{
    while (!spartan_engine_done(eng))
        ;
    return spartan_engine_code(eng);
}

uint32_t spartan_engine_tile(const struct spartan_engine *eng)
{
    return rd(eng, REG(TILE));
}

uint64_t spartan_engine_layer_tiles(unsigned op, uint32_t m, uint32_t k, uint32_t n,
                                    unsigned k_param, unsigned n_param, unsigned acc_rows)
{
    uint32_t rows, inner, cols;   /* Mo, Ki, No */
    if (k_param == 0 || n_param == 0 || acc_rows == 0)
        return 0;
    switch (op) {
    case SPARTAN_ENGINE_OP_FORWARD: rows = m; inner = k; cols = n; break;
    case SPARTAN_ENGINE_OP_DGRAD: rows = m; inner = n; cols = k; break;
    case SPARTAN_ENGINE_OP_WGRAD: rows = k; inner = m; cols = n; break;
    default: return 0;
    }
    return chunks(rows, acc_rows) * chunks(inner, k_param) * chunks(cols, n_param);
}

int spartan_engine_read_entry(const struct spartan_engine *eng, unsigned index,
                              struct spartan_engine_entry *entry)
{
    uint64_t value;
    if (index >= SPARTAN_ENGINE_TABLE_DEPTH)
        return SPARTAN_ENGINE_ERR_RANGE;
    /* Word 0 holds the entry's low 32 bits (the RDL's accesswidth = 32, little-endian). */
    value = rd(eng, ENTRY(index));
    value |= (uint64_t)rd(eng, ENTRY(index) + 4) << 32;
    entry->valid = FIELD(value, SPARTAN_ENGINE__DENSITY_TABLE__ENTRY__VALID) != 0;
    entry->nnz = FIELD(value, SPARTAN_ENGINE__DENSITY_TABLE__ENTRY__NNZ);
    entry->elems = FIELD(value, SPARTAN_ENGINE__DENSITY_TABLE__ENTRY__ELEMS);
    return SPARTAN_ENGINE_OK;
}

int spartan_engine_read_entries(const struct spartan_engine *eng, unsigned table_base,
                                unsigned count, struct spartan_engine_entry *entries)
{
    unsigned t;
    /* Entries [table_base, table_base + count) inside the table (written to avoid overflow). */
    if (table_base > SPARTAN_ENGINE_TABLE_DEPTH || count > SPARTAN_ENGINE_TABLE_DEPTH - table_base)
        return SPARTAN_ENGINE_ERR_RANGE;
    for (t = 0; t < count; t++)
        spartan_engine_read_entry(eng, table_base + t, &entries[t]);
    return SPARTAN_ENGINE_OK;
}

void spartan_engine_read_counters(const struct spartan_engine *eng,
                                  struct spartan_engine_counters *counters)
{
    counters->cycles = rd(eng, REG(CYCLES));
    counters->busy_cycles = rd(eng, REG(BUSY_CYCLES));
    counters->stall_cycles = rd(eng, REG(STALL_CYCLES));
    counters->tiles_dense = rd(eng, REG(TILES_DENSE));
    counters->tiles_sparse = rd(eng, REG(TILES_SPARSE));
    counters->rows_empty = rd(eng, REG(ROWS_EMPTY));
    counters->macs_done = rd(eng, REG(MACS_DONE));
    counters->macs_skipped = rd(eng, REG(MACS_SKIPPED));
    counters->conflict_cycles = rd(eng, REG(CONFLICT_CYCLES));
    counters->zero_beats = rd(eng, REG(ZERO_BEATS));
    counters->tiles_below = rd(eng, REG(TILES_BELOW));
    counters->a_errors = rd(eng, REG(A_ERRORS));
    counters->layer_cycles = rd(eng, REG(LAYER_CYCLES));
    counters->a_words = rd(eng, REG(A_WORDS));
    counters->b_words = rd(eng, REG(B_WORDS));
    counters->c_words = rd(eng, REG(C_WORDS));
}

int spartan_engine_entry_sparse(const struct spartan_engine_entry *entry, unsigned threshold)
{
    return entry->valid && (uint64_t)entry->nnz * 256u <= (uint64_t)threshold * entry->elems;
}
