/* A layer's three training-step GEMMs on the layer engine, through its C driver
   (docs/integration.md). The engine's registers are at ENGINE_BASE on the CPU's bus; the
   matrices are in memory the engine's AXI4 master reaches at the same addresses (uncached, or
   the caches written back before a layer and invalidated after). Build with the driver and
   header generated beside the Verilog: cc -std=c99 -I gen -c docs/examples/engine_layer.c */
#include <stdint.h>

#include "spartan_engine.h"

#define ENGINE_BASE 0x40000000u
/* The generated engine's parameters (gen/spartan_engine.json "params"): the defaults. */
#define ENGINE_K 64u
#define ENGINE_N 64u
#define ENGINE_ACC_ROWS 256u
#define WORD_BYTES 8u   /* data_width / 8 */
#define ELEM_BYTES 1u   /* width 8: int8 operands */
#define ACC_BYTES 4u    /* acc_width 32: int32 results */

static uint32_t mmio_rd(uintptr_t address) { return *(volatile uint32_t *)address; }
static void mmio_wr(uintptr_t address, uint32_t value) { *(volatile uint32_t *)address = value; }

/* Bytes from one row to the next: `cols` elements, rounded up to whole bus words. */
static uint32_t pitch(uint32_t cols, uint32_t bytes)
{
    return (cols * bytes + WORD_BYTES - 1u) / WORD_BYTES * WORD_BYTES;
}

/* One layer: M output positions, K = C_in*kh*kw, N = C_out; where its matrices are (int8 X, W
   and dY, the last quantised by software from the next layer's dX; int32 Y, dX and dW), and
   its slice of the density table. */
struct layer {
    uint32_t m, k, n;
    uint32_t x, w, dy, y, dx, dw;
    unsigned table_base;
};

int engine_setup(struct spartan_engine *eng)
{
    int status = spartan_engine_init(eng, ENGINE_BASE, mmio_rd, mmio_wr);   /* checks ID */
    if (status != SPARTAN_ENGINE_OK)
        return status;
    spartan_engine_set_threshold(eng, 0xC0);   /* a tile runs sparse at <= 75 % nonzeros */
    spartan_engine_set_mode(eng, SPARTAN_ENGINE_MODE_AUTO);
    spartan_engine_clear_counters(eng);
    spartan_engine_forget_history(eng);
    return SPARTAN_ENGINE_OK;
}

/* One GEMM: its own table slice from *table_base on, run, wait. 0, a driver status (< 0) or
   the engine's ERR_CODE (> 0). */
static int gemm(const struct spartan_engine *eng, unsigned op, const struct layer *l,
                uint32_t a, uint32_t a_pitch, uint32_t b, uint32_t b_pitch, uint32_t c,
                uint32_t c_pitch, unsigned *table_base)
{
    int status = spartan_engine_set_table_base(eng, *table_base);
    if (status != SPARTAN_ENGINE_OK)
        return status;
    *table_base += (unsigned)spartan_engine_layer_tiles(op, l->m, l->k, l->n, ENGINE_K,
                                                        ENGINE_N, ENGINE_ACC_ROWS);
    status = spartan_engine_run_layer(eng, op, l->m, l->k, l->n, a, a_pitch, b, b_pitch, c,
                                      c_pitch);
    if (status != SPARTAN_ENGINE_OK)
        return status;
    return (int)spartan_engine_wait(eng);
}

/* Forward Y = X.W, data gradient dX = dY.Wt, weight gradient dW = Xt.dY. Run every training
   iteration with the same table_base: each tile is then processed dense or sparse by what the
   monitor measured on it the iteration before. */
int engine_train_layer(const struct spartan_engine *eng, const struct layer *l)
{
    unsigned base = l->table_base;
    int code = gemm(eng, SPARTAN_ENGINE_OP_FORWARD, l, l->x, pitch(l->k, ELEM_BYTES), l->w,
                    pitch(l->n, ELEM_BYTES), l->y, pitch(l->n, ACC_BYTES), &base);
    if (code == 0)
        code = gemm(eng, SPARTAN_ENGINE_OP_DGRAD, l, l->dy, pitch(l->n, ELEM_BYTES), l->w,
                    pitch(l->n, ELEM_BYTES), l->dx, pitch(l->k, ACC_BYTES), &base);
    if (code == 0)
        code = gemm(eng, SPARTAN_ENGINE_OP_WGRAD, l, l->x, pitch(l->k, ELEM_BYTES), l->dy,
                    pitch(l->n, ELEM_BYTES), l->dw, pitch(l->n, ACC_BYTES), &base);
    return code;
}

/* MACs the engine skipped since engine_setup, in thousands (the sparse tiles' zeros). */
uint32_t engine_kmacs_skipped(const struct spartan_engine *eng)
{
    struct spartan_engine_counters counters;
    spartan_engine_read_counters(eng, &counters);
    return counters.macs_skipped / 1000u;
}
