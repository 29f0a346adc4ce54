// End-to-end harness for the C driver (sw/spartan_core.c) on the Verilated core.
//
// The driver's rd/wr hooks are AXI4-Lite master transactions on s_axil_*: each blocks, clocking
// the design, until its response arrives, while the streams keep moving. A and B come from
// queues (random idle cycles, garbage on tdata while tvalid is low; tvalid and the beat held
// until taken), C goes to a sink with random back-pressure; the AXI4-Lite channels get random
// delays too. verif/tests/test_driver.py writes the script this program runs (one command per line,
// below) and checks what it prints against golden/core.py.
//
//   config LANES WIDTH ACC_WIDTH K N SEED IDLE_PERCENT STALL_PERCENT   (first line)
//   init                       spartan_core_init (must pass the ID check)
//   reset_values               print the values the driver reads before any write
//   errors                     print the status of calls the driver must refuse
//   threshold T | mode M | clear | forget | layer BASE TILES | pass
//   b V...                     one B packet (K*N raw elements), waited for until taken
//   tile ROWS V...             queue one A tile (ROWS*K raw elements)
//   drain                      run until every queued tile's C has left
//   counters                   print every counter (spartan_core_read_counters)
//   table BASE TILES           print the layer's table slice (spartan_core_read_layer)
//
// Output lines: "c TILE V..." (raw C elements of each tile), "counters NAME=V ...",
// "entry INDEX VALID NNZ ELEMS SPARSE", "reset NAME=V ...", "errors NAME=STATUS ...",
// "cycles N". Any failure: a line "FAIL ..." on stderr, exit status 1.

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "Vspartan_core.h"
#include "axil_master.h"
#include "verilated.h"

extern "C" {
#include "spartan_core.h"
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

// --- tdata of any width as 32-bit words (Verilator: up to 64 bits an integer, else VlWide) ---
using Words = std::vector<uint32_t>;

// Verilator expects the bits of a port's storage above its width to be 0.
uint32_t word_mask(std::size_t word, unsigned bits) {
    if (bits >= 32 * (word + 1)) return ~0u;
    if (bits <= 32 * word) return 0;
    return (1u << (bits - 32 * word)) - 1;
}
template <typename T>
void put(T& port, const Words& w, unsigned bits) {
    uint64_t value = w.empty() ? 0 : w[0] & word_mask(0, bits);
    if (w.size() > 1) value |= static_cast<uint64_t>(w[1] & word_mask(1, bits)) << 32;
    port = static_cast<T>(value);
}
template <std::size_t N>
void put(VlWide<N>& port, const Words& w, unsigned bits) {
    for (std::size_t i = 0; i < N; ++i) port[i] = i < w.size() ? w[i] & word_mask(i, bits) : 0;
}
template <typename T>
Words get(const T& port) {
    uint64_t value = port;
    return {static_cast<uint32_t>(value), static_cast<uint32_t>(value >> 32)};
}
template <std::size_t N>
Words get(const VlWide<N>& port) {
    Words w(N);
    for (std::size_t i = 0; i < N; ++i) w[i] = port[i];
    return w;
}

// Lane i of a beat is bits [i*width, (i+1)*width)
// (docs/interfaces.md#lane-packing-and-tdata-width).
Words pack(const std::vector<uint64_t>& lanes, unsigned width) {
    Words w((lanes.size() * width + 31) / 32 + 1, 0);
    for (std::size_t i = 0; i < lanes.size(); ++i)
        for (unsigned b = 0; b < width; ++b)
            if (lanes[i] >> b & 1) {
                std::size_t bit = i * width + b;
                w[bit / 32] |= 1u << (bit % 32);
            }
    return w;
}
std::vector<uint64_t> unpack(const Words& w, unsigned lanes, unsigned width) {
    std::vector<uint64_t> out(lanes, 0);
    for (unsigned i = 0; i < lanes; ++i)
        for (unsigned b = 0; b < width; ++b) {
            std::size_t bit = static_cast<std::size_t>(i) * width + b;
            if (bit / 32 < w.size() && (w[bit / 32] >> (bit % 32) & 1)) out[i] |= uint64_t{1} << b;
        }
    return out;
}

struct Beat {
    Words data;
    bool last;
};

// A source that offers its queue's beats after random idle cycles and holds each until taken.
struct Source {
    std::deque<Beat> queue;
    bool offering = false;
};

struct Config {
    unsigned lanes = 0, width = 0, acc_width = 0, k = 0, n = 0, seed = 1;
    unsigned idle_percent = 0, stall_percent = 0;
};

constexpr uint64_t kTimeout = 200000;  // cycles any one wait may take

class Harness {
  public:
    explicit Harness(const Config& config)
        : cfg_(config), rng_(config.seed), context_(new VerilatedContext),
          top_(new Vspartan_core(context_.get())),
          bus_(*top_, rng_, config.idle_percent, config.stall_percent) {}

    ~Harness() { top_->final(); }

    void reset() {
        top_->rst = 1;
        for (int i = 0; i < 4; ++i) cycle();
        top_->rst = 0;
    }

    // One clock cycle: inputs change after the falling edge; handshakes are sampled after
    // the inputs settle, i.e. as the rising edge sees them.
    void cycle() {
        top_->clk = 0;
        top_->eval();
        context_->timeInc(1);
        drive(a_, top_->s_axis_a_tdata, top_->s_axis_a_tvalid, top_->s_axis_a_tlast);
        drive(b_, top_->s_axis_b_tdata, top_->s_axis_b_tvalid, top_->s_axis_b_tlast);
        top_->m_axis_c_tready = chance(100 - cfg_.stall_percent);
        bus_.drive();
        top_->eval();
        bool a_fire = top_->s_axis_a_tvalid && top_->s_axis_a_tready;
        bool b_fire = top_->s_axis_b_tvalid && top_->s_axis_b_tready;
        bool c_fire = top_->m_axis_c_tvalid && top_->m_axis_c_tready;
        if (c_fire) take_c();
        bus_.sample();
        top_->clk = 1;
        top_->eval();
        context_->timeInc(1);
        if (a_fire) taken(a_);
        if (b_fire) taken(b_);
        ++cycles_;
    }

    // --- AXI4-Lite master: the driver's hooks -----------------------------------------------
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

    // --- streams --------------------------------------------------------------------------
    void send_b(const std::vector<uint64_t>& elements) {
        queue(b_, elements, cfg_.n);
        wait([this] { return b_.queue.empty(); }, "B taken");
    }

    void send_tile(const std::vector<uint64_t>& elements) {
        queue(a_, elements, cfg_.k);
        ++tiles_sent_;
    }

    void drain() {
        wait([this] { return c_tiles_ == tiles_sent_; }, "C of every tile");
    }

    uint64_t cycles() const { return cycles_; }
    std::string take_output() {
        std::string out = out_.str();
        out_.str("");
        return out;
    }

  private:

    bool chance(unsigned percent) {
        return std::uniform_int_distribution<unsigned>(0, 99)(rng_) < percent;
    }
    // Cycles before a master channel offers its request: 0, or 1-4 as often as sources idle.
    unsigned delay() {
        return chance(cfg_.idle_percent) ? std::uniform_int_distribution<unsigned>(1, 4)(rng_) : 0;
    }
    uint32_t garbage() { return static_cast<uint32_t>(rng_()); }

    template <typename T, typename V, typename L>
    void drive(Source& source, T& tdata, V& tvalid, L& tlast) {
        if (!source.offering && !source.queue.empty() && !chance(cfg_.idle_percent))
            source.offering = true;
        unsigned bits = cfg_.lanes * cfg_.width;
        if (source.offering) {
            put(tdata, source.queue.front().data, bits);
            tlast = source.queue.front().last;
        } else {
            Words noise(bits / 32 + 1);
            for (uint32_t& word : noise) word = garbage();
            put(tdata, noise, bits);
            tlast = garbage() & 1;
        }
        tvalid = source.offering;
    }

    void taken(Source& source) {
        source.queue.pop_front();
        source.offering = false;
    }

    // Rows of `row` elements, lanes per beat, tlast on the packet's last beat.
    void queue(Source& source, const std::vector<uint64_t>& elements, unsigned row) {
        if (elements.empty() || elements.size() % row)
            fail("a packet of %zu elements", elements.size());
        for (std::size_t i = 0; i < elements.size(); i += cfg_.lanes) {
            std::vector<uint64_t> lanes(elements.begin() + i, elements.begin() + i + cfg_.lanes);
            source.queue.push_back({pack(lanes, cfg_.width), i + cfg_.lanes == elements.size()});
        }
    }

    void take_c() {
        for (uint64_t v : unpack(get(top_->m_axis_c_tdata), cfg_.lanes, cfg_.acc_width))
            c_.push_back(v);
        if (top_->m_axis_c_tlast) {
            out_ << "c " << c_tiles_;
            for (uint64_t v : c_) out_ << ' ' << v;
            out_ << '\n';
            c_.clear();
            ++c_tiles_;
        }
    }



    template <typename Done>
    void wait(Done done, const char* what) {
        for (uint64_t start = cycles_; !done(); cycle())
            if (cycles_ - start > kTimeout) fail("timeout waiting for %s", what);
    }

    Config cfg_;
    std::mt19937 rng_;
    std::unique_ptr<VerilatedContext> context_;
    std::unique_ptr<Vspartan_core> top_;
    Source a_, b_;
    AxilMaster<Vspartan_core> bus_;
    std::vector<uint64_t> c_;
    uint64_t cycles_ = 0, tiles_sent_ = 0, c_tiles_ = 0;
    std::ostringstream out_;
};

Harness* harness = nullptr;

uint32_t bus_read(uintptr_t address) { return harness->read(address); }
void bus_write(uintptr_t address, uint32_t value) { harness->write(address, value); }

void check(int status, const std::string& what) {
    if (status != SPARTAN_CORE_OK) fail("%s returned %d", what.c_str(), status);
}

std::vector<uint64_t> values(std::istringstream& line) {
    std::vector<uint64_t> v;
    for (uint64_t x; line >> x;) v.push_back(x);
    return v;
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
        line >> word >> cfg.lanes >> cfg.width >> cfg.acc_width >> cfg.k >> cfg.n >> cfg.seed
             >> cfg.idle_percent >> cfg.stall_percent;
        if (word != "config" || !line) fail("the first line must be: config LANES WIDTH ...");
    }
    Harness h(cfg);
    harness = &h;
    h.reset();
    struct spartan_core core;
    const uintptr_t base = 0;
    while (std::getline(script, text)) {
        std::istringstream line(text);
        std::string command;
        if (!(line >> command)) continue;
        std::ostringstream out;
        if (command == "init") {
            check(spartan_core_init(&core, base, bus_read, bus_write), "spartan_core_init");
        } else if (command == "reset_values") {
            struct spartan_core_counters c;
            spartan_core_read_counters(&core, &c);
            out << "reset threshold=" << spartan_core_get_threshold(&core)
                << " mode=" << spartan_core_get_mode(&core) << " tile=" << spartan_core_tile(&core)
                << " tiles_dense=" << c.tiles_dense << " tiles_sparse=" << c.tiles_sparse
                << " macs_done=" << c.macs_done << " busy_cycles=" << c.busy_cycles << '\n';
        } else if (command == "errors") {
            struct spartan_core wrong;
            struct spartan_core_entry entries[2];
            unsigned depth = SPARTAN_CORE_TABLE_DEPTH;
            out << "errors threshold_256=" << spartan_core_set_threshold(&core, 256)
                << " mode_3="
                << spartan_core_set_mode(&core, static_cast<enum spartan_core_mode>(3))
                << " layer_past_end=" << spartan_core_select_layer(&core, depth - 1, 2)
                << " layer_base_past_end=" << spartan_core_select_layer(&core, depth + 1, 0)
                << " entry_past_end=" << spartan_core_read_entry(&core, depth, entries)
                << " read_layer_past_end=" << spartan_core_read_layer(&core, depth - 1, 2, entries)
                << " init_wrong_base=" << spartan_core_init(&wrong, base + 4, bus_read, bus_write)
                << " layer_whole_table=" << spartan_core_select_layer(&core, 0, depth)
                << " depth=" << depth << '\n';
        } else if (command == "threshold") {
            unsigned t = 0;
            line >> t;
            check(spartan_core_set_threshold(&core, t), text);
        } else if (command == "mode") {
            unsigned m = 0;
            line >> m;
            check(spartan_core_set_mode(&core, static_cast<enum spartan_core_mode>(m)), text);
        } else if (command == "clear") {
            spartan_core_clear_counters(&core);
        } else if (command == "forget") {
            spartan_core_forget_history(&core);
        } else if (command == "layer") {
            unsigned table_base = 0, tiles = 0;
            line >> table_base >> tiles;
            check(spartan_core_select_layer(&core, table_base, tiles), text);
        } else if (command == "pass") {
            spartan_core_start_pass(&core);
        } else if (command == "b") {
            h.send_b(values(line));
        } else if (command == "tile") {
            unsigned rows = 0;
            line >> rows;
            std::vector<uint64_t> v = values(line);
            if (v.size() != static_cast<std::size_t>(rows) * cfg.k)
                fail("tile: %zu elements", v.size());
            h.send_tile(v);
        } else if (command == "drain") {
            h.drain();
        } else if (command == "counters") {
            struct spartan_core_counters c;
            spartan_core_read_counters(&core, &c);
            out << "counters CYCLES=" << c.cycles << " BUSY_CYCLES=" << c.busy_cycles
                << " STALL_CYCLES=" << c.stall_cycles << " TILES_DENSE=" << c.tiles_dense
                << " TILES_SPARSE=" << c.tiles_sparse << " ROWS_EMPTY=" << c.rows_empty
                << " MACS_DONE=" << c.macs_done << " MACS_SKIPPED=" << c.macs_skipped
                << " CONFLICT_CYCLES=" << c.conflict_cycles << " ZERO_BEATS=" << c.zero_beats
                << " TILES_BELOW=" << c.tiles_below << " A_ERRORS=" << c.a_errors << '\n';
        } else if (command == "table") {
            unsigned table_base = 0, tiles = 0;
            line >> table_base >> tiles;
            std::vector<spartan_core_entry> entries(tiles);
            check(spartan_core_read_layer(&core, table_base, tiles, entries.data()), text);
            unsigned threshold = spartan_core_get_threshold(&core);
            for (unsigned t = 0; t < tiles; ++t)
                out << "entry " << table_base + t << ' ' << entries[t].valid << ' '
                    << entries[t].nnz << ' ' << entries[t].elems << ' '
                    << spartan_core_entry_sparse(&entries[t], threshold) << '\n';
        } else {
            fail("unknown command %s", command.c_str());
        }
        output << h.take_output() << out.str();
    }
    output << h.take_output() << "cycles " << h.cycles() << '\n';
    return 0;
}
