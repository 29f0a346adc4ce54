// End-to-end harness for the layer engine's C driver (sw/spartan_engine.c) on the Verilated
// engine (spartan_engine).
//
// The driver's rd/wr hooks are AXI4-Lite master transactions on s_axil_*: each blocks,
// clocking the design, until its response arrives (random delays on every channel). The
// engine's AXI4 master (m_axi_*) talks to a memory model: a byte array with INCR bursts on
// AR/R and AW/W/B, random wait cycles on every channel (ready low, valid late), responses
// OKAY unless a fault window says otherwise. The memory checks the AXI4 rules the engine
// promises (docs/interfaces.md#engine): INCR, whole-word size, at most max_burst beats, never
// across 4 KB, ID 0, awcache/arcache 0b0011, prot 0, wlast on exactly the last beat; and that
// every word read lies inside a row of A or B (whole bus words) and every byte written inside
// a result element, written once.
//
// After each layer the harness computes the result itself from the operands as stored in
// memory (plain loops, written from docs/engine.md) and compares every element with what the
// engine wrote; bytes outside the result elements must be unchanged. A refused descriptor
// (ERR_CODE 1 to 6) must leave the bus idle (no valid on AR, AW or W) and memory unchanged.
// verif/tests/test_engine_driver.py writes the script (one command per line) and checks what
// this prints against golden/engine.py.
//
//   config LANES WIDTH SIGNED ACC_WIDTH DATA_WIDTH MAX_BURST SEED WAIT_PERCENT   (first line)
//   init                       spartan_engine_init (must pass the ID check)
//   reset_values               print what the driver reads before any write
//   errors                     print the status of calls the driver must refuse
//   threshold T | mode M | table_base B | clear | forget | irq_en V
//   irq                        print the irq output
//   fill ADDR STRIDE ROWS COLS V...   ROWS x COLS raw elements into memory, row r at ADDR+r*STRIDE
//   layer OP M K N A_ADDR A_STRIDE B_ADDR B_STRIDE C_ADDR C_STRIDE   run_layer, wait, check
//   busy_layer OP M ...        the same, with a second run_layer while the first runs
//   tiles OP M K N KP NP ACC_ROWS     print spartan_engine_layer_tiles
//   fault_read LO HI | fault_write LO HI | fault_clear   SLVERR for beats at [LO, HI)
//   counters                   print every counter (spartan_engine_read_counters)
//   table BASE COUNT           print table entries (spartan_engine_read_entries)
//
// Output lines: "layer key=value ...", "c V..." (the result as written, raw, row-major, after
// an accepted layer), "counters NAME=V ...", "entry INDEX VALID NNZ ELEMS SPARSE",
// "reset key=value ...", "errors key=value ...", "tiles N", "irq V", "cycles N". Any failure: a line
// "FAIL ..." on stderr, exit status 1.

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "Vspartan_engine.h"
#include "axil_master.h"
#include "verilated.h"

extern "C" {
#include "spartan_engine.h"
}

namespace {

[[noreturn]] void fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    std::fputs("FAIL ", stderr);
    std::vfprintf(stderr, format, args);
    std::fputs("\n", stderr);
    va_end(args);
    std::exit(1);
}

// --- a bus word of any width as bytes (Verilator: up to 64 bits an integer, else VlWide) -----
using Bytes = std::vector<uint8_t>;

template <typename T>
void put(T& port, const Bytes& b) {
    uint64_t value = 0;
    for (std::size_t i = 0; i < b.size() && i < 8; ++i) value |= uint64_t{b[i]} << (8 * i);
    port = static_cast<T>(value);
}
template <std::size_t N>
void put(VlWide<N>& port, const Bytes& b) {
    for (std::size_t i = 0; i < N; ++i) {
        uint32_t word = 0;
        for (std::size_t j = 0; j < 4 && 4 * i + j < b.size(); ++j)
            word |= uint32_t{b[4 * i + j]} << (8 * j);
        port[i] = word;
    }
}
template <typename T>
Bytes get(const T& port, std::size_t bytes) {
    uint64_t value = port;
    Bytes b(bytes);
    for (std::size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(value >> (8 * (i % 8)));
    return b;
}
template <std::size_t N>
Bytes get(const VlWide<N>& port, std::size_t bytes) {
    Bytes b(bytes);
    for (std::size_t i = 0; i < bytes; ++i) b[i] = static_cast<uint8_t>(port[i / 4] >> (8 * (i % 4)));
    return b;
}

struct Config {
    unsigned lanes = 0, width = 0, is_signed = 0, acc_width = 0, data_width = 0, max_burst = 0;
    unsigned seed = 1, wait_percent = 0;
};

// One matrix in memory: rows of `cols` elements of `size` bytes, row r at addr + r*stride.
struct Matrix {
    uint64_t addr = 0, stride = 0, rows = 0, cols = 0, size = 1;
    uint64_t row_bytes() const { return cols * size; }
    // The row and byte within it of `address`, if inside the region's rows (else false).
    bool locate(uint64_t address, uint64_t* row, uint64_t* offset) const {
        if (address < addr || stride == 0) return false;
        *row = (address - addr) / stride;
        *offset = (address - addr) % stride;
        return *row < rows;
    }
    // Inside a row's bytes rounded up to whole words of `word` bytes.
    bool in_words(uint64_t address, uint64_t word) const {
        uint64_t row, offset;
        return locate(address, &row, &offset) && offset < (row_bytes() + word - 1) / word * word;
    }
    bool in_elements(uint64_t address) const {
        uint64_t row, offset;
        return locate(address, &row, &offset) && offset < row_bytes();
    }
};

struct Descriptor {
    unsigned op = 0;
    uint32_t m = 0, k = 0, n = 0, a_addr = 0, a_stride = 0, b_addr = 0, b_stride = 0, c_addr = 0,
             c_stride = 0;
};

constexpr uint64_t kTimeout = 2000000;   // cycles any one wait may take
constexpr std::size_t kMemoryBytes = 1u << 20;
constexpr unsigned kOutstanding = 4;      // bursts the memory accepts ahead of its responses

class Harness {
  public:
    explicit Harness(const Config& config)
        : cfg_(config), word_(config.data_width / 8), rng_(config.seed),
          memory_(kMemoryBytes), writes_(kMemoryBytes, 0), context_(new VerilatedContext),
          top_(new Vspartan_engine(context_.get())),
          bus_(*top_, rng_, config.wait_percent, config.wait_percent) {
        for (uint8_t& byte : memory_) byte = static_cast<uint8_t>(rng_());
        for (unsigned size = word_; size > 1; size >>= 1) ++word_log2_;
    }

    ~Harness() { top_->final(); }

    void reset() {
        top_->rst = 1;
        for (int i = 0; i < 4; ++i) cycle();
        top_->rst = 0;
    }

    // One clock cycle: inputs change after the falling edge; handshakes are sampled after the
    // inputs settle, i.e. as the rising edge sees them.
    void cycle() {
        top_->clk = 0;
        top_->eval();
        context_->timeInc(1);
        bus_.drive();
        drive_memory();
        top_->eval();
        bus_.sample();
        sample_memory();
        top_->clk = 1;
        top_->eval();
        context_->timeInc(1);
        ++cycles_;
    }

    // --- AXI4-Lite master: the driver's hooks ----------------------------------------------
    uint32_t read(uintptr_t address) {
        bus_.start_read(static_cast<uint32_t>(address));
        wait([this] { return bus_.done(); }, "AXI4-Lite read");
        if (bus_.resp() != 0)
            fail("read of 0x%lx answered %u, expected OKAY", (unsigned long)address, bus_.resp());
        return bus_.data();
    }

    void write(uintptr_t address, uint32_t value) {
        bus_.start_write(static_cast<uint32_t>(address), value);
        wait([this] { return bus_.done(); }, "AXI4-Lite write");
        if (bus_.resp() != 0)
            fail("write of 0x%lx answered %u, expected OKAY", (unsigned long)address, bus_.resp());
    }

    // --- memory -----------------------------------------------------------------------------
    void fill(uint64_t addr, uint64_t stride, uint64_t rows, uint64_t cols,
              const std::vector<uint64_t>& values) {
        unsigned size = cfg_.width / 8;
        if (values.size() != rows * cols) fail("fill: %zu values for %lu x %lu", values.size(),
                                               (unsigned long)rows, (unsigned long)cols);
        for (uint64_t r = 0; r < rows; ++r)
            for (uint64_t c = 0; c < cols; ++c)
                store(addr + r * stride + c * size, values[r * cols + c], size);
    }

    void fault(bool read, uint64_t lo, uint64_t hi) {
        (read ? read_fault_ : write_fault_) = {lo, hi};
    }

    // The regions of a descriptor (docs/engine.md, "What one START does"): A, B, C.
    void expect_layer(const Descriptor& d) {
        unsigned e = cfg_.width / 8, acc = cfg_.acc_width / 8;
        a_ = {d.a_addr, d.a_stride, d.m, d.op == 1 ? d.n : d.k, e};
        b_reg_ = {d.b_addr, d.b_stride, d.op == 2 ? d.m : d.k, d.n, e};
        c_ = {d.c_addr, d.c_stride, d.op == 2 ? d.k : d.m, d.op == 1 ? d.k : d.n, acc};
        before_ = memory_;
        std::fill(writes_.begin(), writes_.end(), 0);
        seen_ = Traffic();
    }

    struct Traffic {
        uint64_t a_words = 0, b_words = 0, c_words = 0, ar = 0, aw = 0, valid_cycles = 0;
    };
    const Traffic& traffic() const { return seen_; }
    bool irq() const { return top_->irq; }
    bool bus_quiet() const {
        return rq_.empty() && awq_.empty() && bq_.empty() && !top_->m_axi_arvalid
               && !top_->m_axi_awvalid && !top_->m_axi_wvalid;
    }

    // The result (Mo x No values as stored, raw acc_width bits) computed from the operands as
    // stored in memory before the layer: plain loops.
    std::vector<uint64_t> reference(const Descriptor& d) const {
        unsigned e = cfg_.width / 8;
        auto element = [&](const Matrix& x, uint64_t r, uint64_t c) {
            uint64_t raw = load(before_, x.addr + r * x.stride + c * e, e);
            int64_t v = static_cast<int64_t>(raw);
            if (cfg_.is_signed && (raw >> (cfg_.width - 1) & 1)) v -= int64_t{1} << cfg_.width;
            return v;
        };
        const Matrix &a = a_, &b = b_reg_;
        uint64_t rows = c_.rows, cols = c_.cols;
        std::vector<uint64_t> out(rows * cols);
        for (uint64_t i = 0; i < rows; ++i)
            for (uint64_t j = 0; j < cols; ++j) {
                int64_t sum = 0;
                if (d.op == 0)        // Y[i][j] = sum_k X[i][k] W[k][j]
                    for (uint64_t x = 0; x < d.k; ++x) sum += element(a, i, x) * element(b, x, j);
                else if (d.op == 1)   // dX[i][j] = sum_n dY[i][n] W[j][n]
                    for (uint64_t x = 0; x < d.n; ++x) sum += element(a, i, x) * element(b, j, x);
                else                  // dW[i][j] = sum_m X[m][i] dY[m][j]
                    for (uint64_t x = 0; x < d.m; ++x) sum += element(a, x, i) * element(b, x, j);
                uint64_t value = static_cast<uint64_t>(sum);
                if (cfg_.acc_width < 64) value &= (uint64_t{1} << cfg_.acc_width) - 1;
                out[i * cols + j] = value;
            }
        return out;
    }

    // The result as the engine wrote it.
    std::vector<uint64_t> result() const {
        std::vector<uint64_t> out(c_.rows * c_.cols);
        for (uint64_t i = 0; i < c_.rows; ++i)
            for (uint64_t j = 0; j < c_.cols; ++j)
                out[i * c_.cols + j] = load(memory_, c_.addr + i * c_.stride + j * c_.size, c_.size);
        return out;
    }

    // After a layer: every byte outside the result elements unchanged and never written;
    // with `complete`, every result byte written exactly once.
    void check_memory(bool complete, const char* what) const {
        for (std::size_t i = 0; i < kMemoryBytes; ++i) {
            bool inside = c_.in_elements(i);
            if (!inside && (writes_[i] || memory_[i] != before_[i]))
                fail("%s: byte 0x%zx outside the result written (%u times, 0x%02x -> 0x%02x)",
                     what, i, writes_[i], before_[i], memory_[i]);
            if (inside && writes_[i] > 1) fail("%s: result byte 0x%zx written %u times", what, i,
                                               writes_[i]);
            if (inside && complete && writes_[i] != 1)
                fail("%s: result byte 0x%zx never written", what, i);
        }
    }

    uint64_t cycles() const { return cycles_; }

    template <typename Done>
    void wait(Done done, const char* what) {
        for (uint64_t start = cycles_; !done(); cycle())
            if (cycles_ - start > kTimeout) fail("timeout waiting for %s", what);
    }

  private:
    struct Burst {
        uint64_t addr = 0;
        unsigned beats = 0, beat = 0;
        bool error = false;
    };
    struct Window {
        uint64_t lo = 0, hi = 0;
        bool hit(uint64_t a) const { return a >= lo && a < hi; }
    };

    bool chance(unsigned percent) {
        return std::uniform_int_distribution<unsigned>(0, 99)(rng_) < percent;
    }
    unsigned delay() {
        return chance(cfg_.wait_percent) ? std::uniform_int_distribution<unsigned>(1, 4)(rng_) : 0;
    }
    uint32_t garbage() { return static_cast<uint32_t>(rng_()); }

    static uint64_t load(const Bytes& mem, uint64_t addr, unsigned size) {
        uint64_t v = 0;
        for (unsigned i = 0; i < size; ++i) {
            if (addr + i >= mem.size()) fail("load at 0x%lx outside memory", (unsigned long)addr);
            v |= uint64_t{mem[addr + i]} << (8 * i);
        }
        return v;
    }
    void store(uint64_t addr, uint64_t value, unsigned size) {
        for (unsigned i = 0; i < size; ++i) {
            if (addr + i >= memory_.size()) fail("fill at 0x%lx outside memory", (unsigned long)addr);
            memory_[addr + i] = static_cast<uint8_t>(value >> (8 * i));
        }
    }

    // --- AXI4-Lite ----------------------------------------------------------------------------


    // --- AXI4 memory ----------------------------------------------------------------------------
    void drive_memory() {
        top_->m_axi_arready = rq_.size() < kOutstanding && chance(100 - cfg_.wait_percent);
        top_->m_axi_awready = awq_.size() < kOutstanding && chance(100 - cfg_.wait_percent);
        // W only against a known address (a slave may wait for AW).
        top_->m_axi_wready = !awq_.empty() && chance(100 - cfg_.wait_percent);
        if (!r_offer_ && !rq_.empty() && !chance(cfg_.wait_percent)) r_offer_ = true;
        if (!b_offer_ && !bq_.empty() && !chance(cfg_.wait_percent)) b_offer_ = true;
        top_->m_axi_rvalid = r_offer_;
        top_->m_axi_rid = 0;
        if (r_offer_) {
            const Burst& burst = rq_.front();
            uint64_t addr = burst.addr + uint64_t{burst.beat} * word_;
            Bytes data(word_);
            for (unsigned i = 0; i < word_; ++i) data[i] = memory_[addr + i];
            put(top_->m_axi_rdata, data);
            top_->m_axi_rlast = burst.beat + 1 == burst.beats;
            top_->m_axi_rresp = read_fault_.hit(addr) ? 2 : 0;
        } else {
            Bytes noise(word_);
            for (uint8_t& byte : noise) byte = static_cast<uint8_t>(garbage());
            put(top_->m_axi_rdata, noise);
            top_->m_axi_rlast = garbage() & 1;
            top_->m_axi_rresp = garbage() & 3;
        }
        top_->m_axi_bvalid = b_offer_;
        top_->m_axi_bid = 0;
        top_->m_axi_bresp = b_offer_ ? (bq_.front() ? 2 : 0) : garbage() & 3;
    }

    // The AXI4 rules of one AR or AW request; returns the burst.
    Burst request(const char* channel, uint64_t addr, unsigned len, unsigned size, unsigned burst,
                  unsigned id, unsigned cache, unsigned prot) {
        unsigned beats = len + 1;
        if (burst != 1) fail("%s burst type %u, expected INCR (1)", channel, burst);
        if (size != word_log2_) fail("%s size %u, expected %u", channel, size, word_log2_);
        if (beats > cfg_.max_burst) fail("%s of %u beats > max_burst %u", channel, beats,
                                         cfg_.max_burst);
        if (addr % word_) fail("%s address 0x%lx not word-aligned", channel, (unsigned long)addr);
        if ((addr & 0xFFF) + uint64_t{beats} * word_ > 0x1000)
            fail("%s at 0x%lx, %u beats, crosses 4 KB", channel, (unsigned long)addr, beats);
        if (id != 0 || cache != 3 || prot != 0)
            fail("%s id %u cache %u prot %u, expected 0, 3, 0", channel, id, cache, prot);
        if (addr + uint64_t{beats} * word_ > kMemoryBytes)
            fail("%s at 0x%lx outside the memory model", channel, (unsigned long)addr);
        Burst b;
        b.addr = addr;
        b.beats = beats;
        return b;
    }

    void sample_memory() {
        if (top_->m_axi_arvalid || top_->m_axi_awvalid || top_->m_axi_wvalid)
            ++seen_.valid_cycles;
        if (top_->m_axi_arvalid && top_->m_axi_arready) {
            Burst burst = request("AR", top_->m_axi_araddr, top_->m_axi_arlen, top_->m_axi_arsize,
                                  top_->m_axi_arburst, top_->m_axi_arid, top_->m_axi_arcache,
                                  top_->m_axi_arprot);
            for (unsigned i = 0; i < burst.beats; ++i) {
                uint64_t addr = burst.addr + uint64_t{i} * word_;
                if (!a_.in_words(addr, word_) && !b_reg_.in_words(addr, word_))
                    fail("read of 0x%lx: outside A's and B's rows", (unsigned long)addr);
            }
            rq_.push_back(burst);
            ++seen_.ar;
        }
        if (top_->m_axi_rvalid && top_->m_axi_rready) {
            Burst& burst = rq_.front();
            uint64_t addr = burst.addr + uint64_t{burst.beat} * word_;
            if (a_.in_words(addr, word_)) ++seen_.a_words;
            else ++seen_.b_words;
            r_offer_ = false;
            if (++burst.beat == burst.beats) rq_.pop_front();
        }
        if (top_->m_axi_awvalid && top_->m_axi_awready) {
            awq_.push_back(request("AW", top_->m_axi_awaddr, top_->m_axi_awlen,
                                   top_->m_axi_awsize, top_->m_axi_awburst, top_->m_axi_awid,
                                   top_->m_axi_awcache, top_->m_axi_awprot));
            ++seen_.aw;
        }
        if (top_->m_axi_wvalid && top_->m_axi_wready) {
            Burst& burst = awq_.front();
            uint64_t addr = burst.addr + uint64_t{burst.beat} * word_;
            bool last = burst.beat + 1 == burst.beats;
            if (bool(top_->m_axi_wlast) != last)
                fail("wlast %d on beat %u of %u", int(top_->m_axi_wlast), burst.beat, burst.beats);
            Bytes data = get(top_->m_axi_wdata, word_);
            uint64_t strobes = top_->m_axi_wstrb;
            for (unsigned i = 0; i < word_; ++i)
                if (strobes >> i & 1) {
                    if (!c_.in_elements(addr + i))
                        fail("write of byte 0x%lx: outside the result's elements",
                             (unsigned long)(addr + i));
                    if (!write_fault_.hit(addr)) memory_[addr + i] = data[i];
                    ++writes_[addr + i];
                }
            burst.error = burst.error || write_fault_.hit(addr);
            ++seen_.c_words;
            if (++burst.beat == burst.beats) {
                bq_.push_back(burst.error);
                awq_.pop_front();
            }
        }
        if (top_->m_axi_bvalid && top_->m_axi_bready) {
            bq_.pop_front();
            b_offer_ = false;
        }
    }

    Config cfg_;
    unsigned word_, word_log2_ = 0;
    std::mt19937 rng_;
    Bytes memory_, before_;
    std::vector<uint8_t> writes_;
    std::unique_ptr<VerilatedContext> context_;
    std::unique_ptr<Vspartan_engine> top_;
    AxilMaster<Vspartan_engine> bus_;
    std::deque<Burst> rq_, awq_;
    std::deque<bool> bq_;   // error flag of each write response waiting
    bool r_offer_ = false, b_offer_ = false;
    Window read_fault_, write_fault_;
    Matrix a_, b_reg_, c_;
    Traffic seen_;
    uint64_t cycles_ = 0;
};

Harness* harness = nullptr;

uint32_t bus_read(uintptr_t address) { return harness->read(address); }
void bus_write(uintptr_t address, uint32_t value) { harness->write(address, value); }

void check(int status, const std::string& what) {
    if (status != SPARTAN_ENGINE_OK) fail("%s returned %d", what.c_str(), status);
}

std::vector<uint64_t> values(std::istringstream& line) {
    std::vector<uint64_t> v;
    for (uint64_t x; line >> x;) v.push_back(x);
    return v;
}

Descriptor descriptor(std::istringstream& line, const std::string& text) {
    Descriptor d;
    line >> d.op >> d.m >> d.k >> d.n >> d.a_addr >> d.a_stride >> d.b_addr >> d.b_stride
        >> d.c_addr >> d.c_stride;
    if (!line) fail("bad descriptor: %s", text.c_str());
    return d;
}

int start(const struct spartan_engine* eng, const Descriptor& d) {
    return spartan_engine_run_layer(eng, d.op, d.m, d.k, d.n, d.a_addr, d.a_stride, d.b_addr,
                                    d.b_stride, d.c_addr, d.c_stride);
}

// One layer through the driver: START, (optionally a second START while it runs), wait, then
// the checks of the top of this file. Prints "layer ..." and, when accepted, "c ...".
void run_layer(Harness& h, const struct spartan_engine* eng, const Descriptor& d, bool busy_start,
               std::ostream& out) {
    h.expect_layer(d);
    uint64_t started = h.cycles();
    check(start(eng, d), "spartan_engine_run_layer");
    int second = 0;
    unsigned busy_seen = 0;
    if (busy_start) {
        busy_seen = spartan_engine_busy(eng);
        second = start(eng, d);
    }
    unsigned code = spartan_engine_wait(eng);
    uint64_t seen_cycles = h.cycles() - started;
    // Every response the engine waited for has come: the bus is quiet at DONE.
    if (!h.bus_quiet()) fail("DONE with a transaction outstanding (code %u)", code);
    bool irq = h.irq();
    unsigned busy = spartan_engine_busy(eng);
    uint32_t tile = spartan_engine_tile(eng);
    struct spartan_engine_counters c;
    spartan_engine_read_counters(eng, &c);
    const Harness::Traffic& t = h.traffic();
    out << "layer code=" << code << " busy=" << busy << " irq=" << irq << " tile=" << tile
        << " layer_cycles=" << c.layer_cycles << " a_words=" << c.a_words
        << " b_words=" << c.b_words << " c_words=" << c.c_words << " seen_cycles=" << seen_cycles
        << " seen_a=" << t.a_words << " seen_b=" << t.b_words << " seen_c=" << t.c_words
        << " ar=" << t.ar << " aw=" << t.aw << " valid_cycles=" << t.valid_cycles;
    if (busy_start) out << " busy_seen=" << busy_seen << " second=" << second;
    out << '\n';
    if (code >= 1 && code <= 6) {   // refused: nothing read or written, not even offered
        if (t.valid_cycles) fail("refused descriptor (code %u), but the engine drove a valid",
                                 code);
        h.check_memory(false, "refused descriptor");
        return;
    }
    if (code != 0) {                // a memory error: results undefined, writes stay inside C
        h.check_memory(false, "layer with a memory error");
        return;
    }
    h.check_memory(true, "layer");
    std::vector<uint64_t> want = h.reference(d), got = h.result();
    for (std::size_t i = 0; i < want.size(); ++i)
        if (got[i] != want[i])
            fail("OP %u M %u K %u N %u: result element %zu is 0x%llx, expected 0x%llx", d.op, d.m,
                 d.k, d.n, i, (unsigned long long)got[i], (unsigned long long)want[i]);
    out << 'c';
    for (uint64_t v : got) out << ' ' << v;
    out << '\n';
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::fprintf(stderr, "usage: %s SCRIPT OUTPUT\n", argv[0]);
        return 2;
    }
    std::ifstream script(argv[1]);
    std::ofstream output(argv[2]);
    if (!script || !output) fail("cannot open %s or %s", argv[1], argv[2]);
    std::string text;
    Config cfg;
    {
        std::getline(script, text);
        std::istringstream line(text);
        std::string word;
        line >> word >> cfg.lanes >> cfg.width >> cfg.is_signed >> cfg.acc_width
             >> cfg.data_width >> cfg.max_burst >> cfg.seed >> cfg.wait_percent;
        if (word != "config" || !line) fail("the first line must be: config LANES WIDTH ...");
    }
    Harness h(cfg);
    harness = &h;
    h.reset();
    struct spartan_engine eng;
    const uintptr_t base = 0;
    while (std::getline(script, text)) {
        std::istringstream line(text);
        std::string command;
        if (!(line >> command)) continue;
        std::ostringstream out;
        if (command == "init") {
            check(spartan_engine_init(&eng, base, bus_read, bus_write), "spartan_engine_init");
        } else if (command == "reset_values") {
            struct spartan_engine_counters c;
            spartan_engine_read_counters(&eng, &c);
            out << "reset threshold=" << spartan_engine_get_threshold(&eng)
                << " mode=" << spartan_engine_get_mode(&eng)
                << " table_base=" << spartan_engine_get_table_base(&eng)
                << " tile=" << spartan_engine_tile(&eng) << " busy=" << spartan_engine_busy(&eng)
                << " done=" << spartan_engine_done(&eng) << " code=" << spartan_engine_code(&eng)
                << " irq=" << h.irq() << " tiles_dense=" << c.tiles_dense
                << " layer_cycles=" << c.layer_cycles << " a_words=" << c.a_words
                << " c_words=" << c.c_words << '\n';
        } else if (command == "errors") {
            struct spartan_engine wrong;
            struct spartan_engine_entry entries[2];
            unsigned depth = SPARTAN_ENGINE_TABLE_DEPTH;
            out << "errors threshold_256=" << spartan_engine_set_threshold(&eng, 256)
                << " mode_3="
                << spartan_engine_set_mode(&eng, static_cast<enum spartan_engine_mode>(3))
                << " table_base_depth=" << spartan_engine_set_table_base(&eng, depth)
                << " entry_past_end=" << spartan_engine_read_entry(&eng, depth, entries)
                << " entries_past_end=" << spartan_engine_read_entries(&eng, depth - 1, 2, entries)
                << " op_4=" << spartan_engine_run_layer(&eng, 4, 1, 1, 1, 0, 64, 64, 64, 128, 64)
                << " done_after_op_4=" << spartan_engine_done(&eng)
                << " init_wrong_base=" << spartan_engine_init(&wrong, base + 4, bus_read, bus_write)
                << " table_base_last=" << spartan_engine_set_table_base(&eng, depth - 1)
                << " table_base_read=" << spartan_engine_get_table_base(&eng)
                << " depth=" << depth << '\n';
            check(spartan_engine_set_table_base(&eng, 0), "table_base 0");
        } else if (command == "threshold") {
            unsigned t = 0;
            line >> t;
            check(spartan_engine_set_threshold(&eng, t), text);
        } else if (command == "mode") {
            unsigned m = 0;
            line >> m;
            check(spartan_engine_set_mode(&eng, static_cast<enum spartan_engine_mode>(m)), text);
        } else if (command == "table_base") {
            unsigned b = 0;
            line >> b;
            check(spartan_engine_set_table_base(&eng, b), text);
        } else if (command == "irq_en") {
            unsigned v = 0;
            line >> v;
            spartan_engine_set_irq_enable(&eng, static_cast<int>(v));
        } else if (command == "irq") {
            out << "irq " << h.irq() << '\n';
        } else if (command == "clear") {
            spartan_engine_clear_counters(&eng);
        } else if (command == "forget") {
            spartan_engine_forget_history(&eng);
        } else if (command == "fill") {
            uint64_t addr = 0, stride = 0, rows = 0, cols = 0;
            line >> addr >> stride >> rows >> cols;
            h.fill(addr, stride, rows, cols, values(line));
        } else if (command == "fault_read" || command == "fault_write") {
            uint64_t lo = 0, hi = 0;
            line >> lo >> hi;
            h.fault(command == "fault_read", lo, hi);
        } else if (command == "fault_clear") {
            h.fault(true, 0, 0);
            h.fault(false, 0, 0);
        } else if (command == "layer" || command == "busy_layer") {
            run_layer(h, &eng, descriptor(line, text), command == "busy_layer", out);
        } else if (command == "tiles") {
            unsigned op = 0, kp = 0, np = 0, rows = 0;
            uint32_t m = 0, k = 0, n = 0;
            line >> op >> m >> k >> n >> kp >> np >> rows;
            out << "tiles " << spartan_engine_layer_tiles(op, m, k, n, kp, np, rows) << '\n';
        } else if (command == "counters") {
            struct spartan_engine_counters c;
            spartan_engine_read_counters(&eng, &c);
            out << "counters CYCLES=" << c.cycles << " BUSY_CYCLES=" << c.busy_cycles
                << " STALL_CYCLES=" << c.stall_cycles << " TILES_DENSE=" << c.tiles_dense
                << " TILES_SPARSE=" << c.tiles_sparse << " ROWS_EMPTY=" << c.rows_empty
                << " MACS_DONE=" << c.macs_done << " MACS_SKIPPED=" << c.macs_skipped
                << " CONFLICT_CYCLES=" << c.conflict_cycles << " ZERO_BEATS=" << c.zero_beats
                << " TILES_BELOW=" << c.tiles_below << " A_ERRORS=" << c.a_errors
                << " LAYER_CYCLES=" << c.layer_cycles << " A_WORDS=" << c.a_words
                << " B_WORDS=" << c.b_words << " C_WORDS=" << c.c_words << '\n';
        } else if (command == "table") {
            unsigned table_base = 0, count = 0;
            line >> table_base >> count;
            std::vector<spartan_engine_entry> entries(count);
            check(spartan_engine_read_entries(&eng, table_base, count, entries.data()), text);
            unsigned threshold = spartan_engine_get_threshold(&eng);
            for (unsigned t = 0; t < count; ++t)
                out << "entry " << table_base + t << ' ' << entries[t].valid << ' '
                    << entries[t].nnz << ' ' << entries[t].elems << ' '
                    << spartan_engine_entry_sparse(&entries[t], threshold) << '\n';
        } else {
            fail("unknown command %s", command.c_str());
        }
        output << out.str();
    }
    output << "cycles " << h.cycles() << '\n';
    return 0;
}
