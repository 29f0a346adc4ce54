// The AXI4-Lite master behind the C drivers' rd/wr hooks in the Verilated harnesses
// (driver_harness.cpp: the core; engine_driver_harness.cpp: the layer engine). A request
// waits 0 cycles, or 1-4 as often as `idle_percent` says, before it is offered; garbage drives
// the address and data while valid is low; bready/rready are low `stall_percent` of cycles.
// The harness calls drive() after the falling edge and sample() once the inputs settled.
#pragma once

#include <cstdint>
#include <random>

template <typename Top>
class AxilMaster {
  public:
    AxilMaster(Top& top, std::mt19937& rng, unsigned idle_percent, unsigned stall_percent)
        : top_(top), rng_(rng), idle_percent_(idle_percent), stall_percent_(stall_percent) {}

    void start_read(uint32_t address) {
        ar_.pending = true;
        ar_.delay = delay();
        ar_.address = address;
        response_ = Response{};
    }

    void start_write(uint32_t address, uint32_t value) {
        aw_.pending = w_.pending = true;
        aw_.delay = delay();
        w_.delay = delay();
        aw_.address = address;
        w_.data = value;
        response_ = Response{};
    }

    // The response of the last request: B of a write, R of a read.
    bool done() const { return response_.done; }
    unsigned resp() const { return response_.resp; }
    uint32_t data() const { return response_.data; }

    void drive() {
        top_.s_axil_awvalid = aw_.pending && aw_.delay == 0;
        top_.s_axil_awaddr = aw_.pending ? aw_.address : garbage() & 0xFFFF;
        top_.s_axil_wvalid = w_.pending && w_.delay == 0;
        top_.s_axil_wdata = w_.pending ? w_.data : garbage();
        top_.s_axil_wstrb = 0xF;
        top_.s_axil_bready = chance(100 - stall_percent_);
        top_.s_axil_arvalid = ar_.pending && ar_.delay == 0;
        top_.s_axil_araddr = ar_.pending ? ar_.address : garbage() & 0xFFFF;
        top_.s_axil_rready = chance(100 - stall_percent_);
    }

    void sample() {
        if (top_.s_axil_awvalid && top_.s_axil_awready) aw_.pending = false;
        else if (aw_.delay) --aw_.delay;
        if (top_.s_axil_wvalid && top_.s_axil_wready) w_.pending = false;
        else if (w_.delay) --w_.delay;
        if (top_.s_axil_bvalid && top_.s_axil_bready) {
            response_.done = true;
            response_.resp = top_.s_axil_bresp;
        }
        if (top_.s_axil_arvalid && top_.s_axil_arready) ar_.pending = false;
        else if (ar_.delay) --ar_.delay;
        if (top_.s_axil_rvalid && top_.s_axil_rready) {
            response_.done = true;
            response_.resp = top_.s_axil_rresp;
            response_.data = top_.s_axil_rdata;
        }
    }

  private:
    struct Request {
        bool pending = false;
        unsigned delay = 0;
        uint32_t address = 0;
        uint32_t data = 0;
    };
    struct Response {
        bool done = false;
        unsigned resp = 0;
        uint32_t data = 0;
    };

    bool chance(unsigned percent) {
        return std::uniform_int_distribution<unsigned>(0, 99)(rng_) < percent;
    }
    unsigned delay() {
        return chance(idle_percent_) ? std::uniform_int_distribution<unsigned>(1, 4)(rng_) : 0;
    }
    uint32_t garbage() { return static_cast<uint32_t>(rng_()); }

    Top& top_;
    std::mt19937& rng_;
    unsigned idle_percent_, stall_percent_;
    Request aw_, w_, ar_;
    Response response_;
};
