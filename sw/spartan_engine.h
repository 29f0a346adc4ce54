/*
 * Driver for the Spartan layer engine's AXI4-Lite registers (docs/engine.md,
 * docs/interfaces.md#engine).
 *
 * Portable C99, no allocation, no globals: the caller supplies the bus access as two hooks,
 * rd(address) and wr(address, value), each one aligned 32-bit AXI4-Lite transfer, and the
 * engine's base address. Register offsets, field masks and reset values come from
 * spartan_engine_regs.h, which `spartan generate engine` writes beside spartan_engine.v for the
 * configuration that was generated (PeakRDL-cheader, from the same register map as the RTL):
 * build the copy of this driver written with it (NAME.h and NAME.c for a top named NAME).
 *
 * The engine reads its operands from memory and writes the result there itself (its AXI4
 * master); the driver only programs the descriptor and waits. Addresses are the engine's bus
 * addresses (32 bits), strides bytes from one row to the next; both multiples of the bus word
 * (data_width/8 bytes), every matrix row-major, elements little-endian:
 *
 *     struct spartan_engine eng;
 *     if (spartan_engine_init(&eng, BASE, rd, wr) != SPARTAN_ENGINE_OK) ...   // checks ID
 *     spartan_engine_set_threshold(&eng, 0xC0);        // sparse iff density <= 75 %
 *     spartan_engine_clear_counters(&eng);
 *     spartan_engine_forget_history(&eng);
 *     for each iteration, for each layer:
 *         spartan_engine_set_table_base(&eng, base[layer]);   // its own table slice
 *         spartan_engine_run_layer(&eng, SPARTAN_ENGINE_OP_FORWARD, M, K, N,
 *                                  x_addr, x_stride, w_addr, w_stride, y_addr, y_stride);
 *         code = spartan_engine_wait(&eng);            // 0, or the ERR_CODE
 *     spartan_engine_read_counters(&eng, &counters);
 *
 * Interrupt: with spartan_engine_set_irq_enable(&eng, 1) the engine's irq output is high while
 * STATUS.DONE is set, and DONE stays set until the next START. An interrupt handler therefore
 * acknowledges by disabling the interrupt (or by starting the next layer), then re-enables it
 * before waiting for the next layer.
 */
#ifndef SPARTAN_ENGINE_H
#define SPARTAN_ENGINE_H

#include <stddef.h>
#include <stdint.h>

/* The generated register header. `spartan generate engine --name NAME` writes this
   driver as NAME.h and NAME.c beside NAME_regs.h, every spartan_engine/SPARTAN_ENGINE prefix
   renamed to NAME: drivers of differently named blocks compile into one program. */
#include "spartan_engine_regs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One 32-bit read / write of the bus at a byte address. */
typedef uint32_t (*spartan_engine_rd_fn)(uintptr_t address);
typedef void (*spartan_engine_wr_fn)(uintptr_t address, uint32_t value);

struct spartan_engine {
    uintptr_t base;
    spartan_engine_rd_fn rd;
    spartan_engine_wr_fn wr;
};

/* What the driver's calls return (never the engine's ERR_CODE: see spartan_engine_code). */
enum spartan_engine_status {
    SPARTAN_ENGINE_OK = 0,
    SPARTAN_ENGINE_ERR_ID = -1,     /* the ID register does not hold the generated engine's ID */
    SPARTAN_ENGINE_ERR_RANGE = -2,  /* an argument outside what the register or table holds */
    SPARTAN_ENGINE_ERR_BUSY = -3    /* a layer is running: nothing written (a START now would
                                       be refused with ERR_CODE 7 and mark the running layer's
                                       STATUS.ERR) */
};

/* ERR_CODE values, as spartan_engine_wait() returns them (docs/engine.md, "Descriptor checks
   and errors"). Codes 1 to 6: the descriptor was refused at START, nothing read or written.
   Codes 8, 9: a memory access was answered with an error; the layer's results are undefined. */
enum spartan_engine_code {
    SPARTAN_ENGINE_CODE_NONE = 0,
    SPARTAN_ENGINE_CODE_BAD_OP = 1,      /* OP is 3 */
    SPARTAN_ENGINE_CODE_BAD_DIM = 2,     /* M, K or N is 0 or above 65535 */
    SPARTAN_ENGINE_CODE_UNALIGNED = 3,   /* an address or stride is not a multiple of the word */
    SPARTAN_ENGINE_CODE_BAD_STRIDE = 4,  /* a stride is smaller than its rows (in whole words) */
    SPARTAN_ENGINE_CODE_RANGE = 5,       /* a matrix ends past 2**32 */
    SPARTAN_ENGINE_CODE_OVERLAP = 6,     /* the result's region intersects A's or B's */
    SPARTAN_ENGINE_CODE_BUSY = 7,        /* START while a layer ran (the layer went on) */
    SPARTAN_ENGINE_CODE_READ_RESP = 8,   /* a read answered SLVERR/DECERR */
    SPARTAN_ENGINE_CODE_WRITE_RESP = 9   /* a write answered SLVERR/DECERR */
};

/* CTRL.MODE values. */
enum spartan_engine_mode {
    SPARTAN_ENGINE_MODE_AUTO = 0,   /* per tile, from the density table */
    SPARTAN_ENGINE_MODE_DENSE = 1,  /* every tile dense */
    SPARTAN_ENGINE_MODE_SPARSE = 2  /* every tile sparse (zero-value compressed) */
};

/* OP values: which GEMM of a training step. (A, B) as stored at A_ADDR, B_ADDR -> result. */
enum spartan_engine_op {
    SPARTAN_ENGINE_OP_FORWARD = 0,  /* X (M x K), W (K x N)  -> Y  = X.W   (M x N) */
    SPARTAN_ENGINE_OP_DGRAD = 1,    /* dY (M x N), W (K x N) -> dX = dY.Wt (M x K) */
    SPARTAN_ENGINE_OP_WGRAD = 2     /* X (M x K), dY (M x N) -> dW = Xt.dY (K x N) */
};

/* Density-table entries of this configuration. */
#define SPARTAN_ENGINE_TABLE_DEPTH                           \
    (sizeof(((spartan_engine_t *)0)->DENSITY_TABLE.ENTRY)    \
     / sizeof(((spartan_engine_t *)0)->DENSITY_TABLE.ENTRY[0]))

/* What the monitor measured on one tile in the last layer that saw it. */
struct spartan_engine_entry {
    int valid;       /* 0: no measurement (reset, forgotten, never recorded): ignore the rest */
    uint32_t nnz;    /* nonzero elements (padding counts as zeros) */
    uint32_t elems;  /* elements */
};

/* Every counter: 32-bit, saturating. The core's (the first twelve) count from reset or
   spartan_engine_clear_counters() across layers; the engine's own four describe the last
   START taken while idle: zeroed by it, so after a refused descriptor LAYER_CYCLES holds the
   cycles of its checks and the word counters 0 (a START while busy is refused without
   touching them). */
struct spartan_engine_counters {
    uint32_t cycles, busy_cycles, stall_cycles;
    uint32_t tiles_dense, tiles_sparse, rows_empty;
    uint32_t macs_done, macs_skipped, conflict_cycles;
    uint32_t zero_beats, tiles_below, a_errors;
    uint32_t layer_cycles;  /* cycles from START to DONE */
    uint32_t a_words, b_words, c_words;  /* bus words read for A and B, written for C */
};

/* Fills *eng and checks the ID register: SPARTAN_ENGINE_ERR_ID if it is not the generated one. */
int spartan_engine_init(struct spartan_engine *eng, uintptr_t base, spartan_engine_rd_fn rd,
                        spartan_engine_wr_fn wr);

/* THRESHOLD: a tile with history runs sparse (auto mode) iff nnz*256 <= threshold*elems. */
int spartan_engine_set_threshold(const struct spartan_engine *eng, unsigned threshold);
unsigned spartan_engine_get_threshold(const struct spartan_engine *eng);

int spartan_engine_set_mode(const struct spartan_engine *eng, enum spartan_engine_mode mode);
enum spartan_engine_mode spartan_engine_get_mode(const struct spartan_engine *eng);

/* One-shot commands (CTRL's single-pulse fields); MODE is kept. */
void spartan_engine_clear_counters(const struct spartan_engine *eng);
void spartan_engine_forget_history(const struct spartan_engine *eng);

/* TABLE_BASE: tile t of the next layers is decided by, and records into, table entry
   table_base + t (entries past the table's end: no history, nothing recorded). Give each layer
   its own slice (spartan_engine_layer_tiles() entries). SPARTAN_ENGINE_ERR_RANGE if table_base
   is not an entry of the table. */
int spartan_engine_set_table_base(const struct spartan_engine *eng, unsigned table_base);
unsigned spartan_engine_get_table_base(const struct spartan_engine *eng);

/* IRQ_EN: irq is high while STATUS.DONE and this (see the top of this file). */
void spartan_engine_set_irq_enable(const struct spartan_engine *eng, int enable);

/* Programs the descriptor (OP, M, K, N, the three addresses and strides) and writes
   CTRL.START (MODE kept); returns at once. The engine checks the descriptor itself: a refused
   one ends with DONE and its ERR_CODE, which spartan_engine_wait() returns. The driver refuses
   only what the registers cannot hold (SPARTAN_ENGINE_ERR_RANGE: op above 3; op 3 is passed on
   and refused by the engine as BAD_OP) and a START while a layer runs (SPARTAN_ENGINE_ERR_BUSY:
   nothing written). */
int spartan_engine_run_layer(const struct spartan_engine *eng, unsigned op, uint32_t m,
                             uint32_t k, uint32_t n, uint32_t a_addr, uint32_t a_stride,
                             uint32_t b_addr, uint32_t b_stride, uint32_t c_addr,
                             uint32_t c_stride);

/* STATUS.BUSY, STATUS.DONE (the last START finished; cleared by the next START) and ERR_CODE
   (an enum spartan_engine_code value). */
int spartan_engine_busy(const struct spartan_engine *eng);
int spartan_engine_done(const struct spartan_engine *eng);
unsigned spartan_engine_code(const struct spartan_engine *eng);

/* Polls STATUS until DONE, then returns ERR_CODE: 0 when the layer ran correctly. Call it
   only after a START (spartan_engine_run_layer returned SPARTAN_ENGINE_OK): before the first
   START DONE never rises. */
unsigned spartan_engine_wait(const struct spartan_engine *eng);

/* TILE: tiles started in the running or last accepted layer (all of them, once DONE without
   error; a refused START leaves it as it was). */
uint32_t spartan_engine_tile(const struct spartan_engine *eng);

/* Tiles one layer runs (and table entries it uses), from the engine's generated parameters k,
   n and acc_rows (the manifest's "params"): ceil(Mo/acc_rows) * ceil(Ki/k) * ceil(No/n) with
   (Mo, Ki, No) = (M, K, N), (M, N, K), (K, M, N) for OP 0, 1, 2. 0 for another op or a 0. */
uint64_t spartan_engine_layer_tiles(unsigned op, uint32_t m, uint32_t k, uint32_t n,
                                    unsigned k_param, unsigned n_param, unsigned acc_rows);

int spartan_engine_read_entry(const struct spartan_engine *eng, unsigned index,
                              struct spartan_engine_entry *entry);
/* entries[0 .. count-1] = table entries table_base .. table_base + count - 1. */
int spartan_engine_read_entries(const struct spartan_engine *eng, unsigned table_base,
                                unsigned count, struct spartan_engine_entry *entries);

void spartan_engine_read_counters(const struct spartan_engine *eng,
                                  struct spartan_engine_counters *counters);

/* 1 if the engine, in auto mode at this threshold, processes the tile this entry serves sparse. */
int spartan_engine_entry_sparse(const struct spartan_engine_entry *entry, unsigned threshold);

#ifdef __cplusplus
}
#endif

#endif /* SPARTAN_ENGINE_H */
