/*
 * Driver for the Spartan core's AXI4-Lite registers (docs/core.md, docs/registers.md).
 *
 * Portable C99, no allocation, no globals: the caller supplies the bus access as two hooks,
 * rd(address) and wr(address, value), each one aligned 32-bit AXI4-Lite transfer, and the
 * core's base address. Register offsets, field masks and reset values come from
 * spartan_core_regs.h, which `spartan generate core` writes beside spartan_core.v for the
 * configuration that was generated (PeakRDL-cheader, from the same register map as the RTL):
 * build the copy of this driver written with it (NAME.h and NAME.c for a top named NAME).
 *
 * The programming sequence of docs/core.md:
 *
 *     struct spartan_core core;
 *     if (spartan_core_init(&core, BASE, rd, wr) != SPARTAN_CORE_OK) ...   // checks ID
 *     spartan_core_set_threshold(&core, 0xC0);        // sparse iff density <= 75 %
 *     spartan_core_clear_counters(&core);
 *     spartan_core_forget_history(&core);
 *     for each layer:
 *         spartan_core_select_layer(&core, base[layer], tiles[layer]);   // its table slice
 *         stream B (s_axis_b), once per layer
 *         for each iteration:
 *             spartan_core_start_pass(&core);   // no tile in flight
 *             stream the A tiles, collect C
 *     spartan_core_read_counters(&core, &counters);
 *     spartan_core_read_layer(&core, base[layer], tiles[layer], entries);
 */
#ifndef SPARTAN_CORE_H
#define SPARTAN_CORE_H

#include <stddef.h>
#include <stdint.h>

/* The generated register header. `spartan generate core --name NAME` writes this
   driver as NAME.h and NAME.c beside NAME_regs.h, every spartan_core/SPARTAN_CORE prefix
   renamed to NAME: drivers of differently named blocks compile into one program. */
#include "spartan_core_regs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One 32-bit read / write of the bus at a byte address. */
typedef uint32_t (*spartan_core_rd_fn)(uintptr_t address);
typedef void (*spartan_core_wr_fn)(uintptr_t address, uint32_t value);

struct spartan_core {
    uintptr_t base;
    spartan_core_rd_fn rd;
    spartan_core_wr_fn wr;
};

enum spartan_core_status {
    SPARTAN_CORE_OK = 0,
    SPARTAN_CORE_ERR_ID = -1,    /* the ID register does not hold the generated core's ID */
    SPARTAN_CORE_ERR_RANGE = -2  /* an argument outside what the register or table holds */
};

/* CTRL.MODE values. */
enum spartan_core_mode {
    SPARTAN_CORE_MODE_AUTO = 0,   /* per tile, from the density table */
    SPARTAN_CORE_MODE_DENSE = 1,  /* every tile dense */
    SPARTAN_CORE_MODE_SPARSE = 2  /* every tile sparse (zero-value compressed) */
};

/* Density-table entries of this configuration. */
#define SPARTAN_CORE_TABLE_DEPTH                           \
    (sizeof(((spartan_core_t *)0)->DENSITY_TABLE.ENTRY)    \
     / sizeof(((spartan_core_t *)0)->DENSITY_TABLE.ENTRY[0]))

/* What the monitor measured on one tile in the last pass that saw it. */
struct spartan_core_entry {
    int valid;       /* 0: no measurement (reset, forgotten, never recorded): ignore the rest */
    uint32_t nnz;    /* nonzero elements */
    uint32_t elems;  /* elements */
};

/* Every counter: 32-bit, saturating, zeroed by reset and spartan_core_clear_counters(). */
struct spartan_core_counters {
    uint32_t cycles, busy_cycles, stall_cycles;
    uint32_t tiles_dense, tiles_sparse, rows_empty;
    uint32_t macs_done, macs_skipped, conflict_cycles;
    uint32_t zero_beats, tiles_below, a_errors;
};

/* Fills *core and checks the ID register: SPARTAN_CORE_ERR_ID if it is not the generated one. */
int spartan_core_init(struct spartan_core *core, uintptr_t base, spartan_core_rd_fn rd,
                      spartan_core_wr_fn wr);

/* THRESHOLD: a tile with history runs sparse (auto mode) iff nnz*256 <= threshold*elems. */
int spartan_core_set_threshold(const struct spartan_core *core, unsigned threshold);
unsigned spartan_core_get_threshold(const struct spartan_core *core);

int spartan_core_set_mode(const struct spartan_core *core, enum spartan_core_mode mode);
enum spartan_core_mode spartan_core_get_mode(const struct spartan_core *core);

/* One-shot commands (CTRL's single-pulse fields); MODE is kept. */
void spartan_core_clear_counters(const struct spartan_core *core);
void spartan_core_forget_history(const struct spartan_core *core);
/* Number the next tile 0. Call between passes, with no tile in flight. */
void spartan_core_start_pass(const struct spartan_core *core);

/* This layer's slice of the table: entries [table_base, table_base + tiles) serve its tiles
   0 .. tiles-1. SPARTAN_CORE_ERR_RANGE if the slice does not fit in the table. */
int spartan_core_select_layer(const struct spartan_core *core, unsigned table_base,
                              unsigned tiles);

/* The index the next A tile of this pass gets (TILE). */
uint32_t spartan_core_tile(const struct spartan_core *core);

int spartan_core_read_entry(const struct spartan_core *core, unsigned index,
                            struct spartan_core_entry *entry);
/* entries[0 .. tiles-1] = the table slice of a layer. */
int spartan_core_read_layer(const struct spartan_core *core, unsigned table_base, unsigned tiles,
                            struct spartan_core_entry *entries);

void spartan_core_read_counters(const struct spartan_core *core,
                                struct spartan_core_counters *counters);

/* 1 if the core, in auto mode at this threshold, processes the tile this entry serves sparse. */
int spartan_core_entry_sparse(const struct spartan_core_entry *entry, unsigned threshold);

#ifdef __cplusplus
}
#endif

#endif /* SPARTAN_CORE_H */
