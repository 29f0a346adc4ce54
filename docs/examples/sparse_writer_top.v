// SparseWriter in Verilog (docs/integration.md): the sparsity monitor and the compactor,
// generated under names of their own, instantiated from their _inst.v templates.
//   $ spartan generate monitor --name wr_mon -o gen/
//   $ spartan generate compactor --name wr_cmp -o gen/
//   $ verilator --lint-only -Wall -F gen/wr_mon.f -F gen/wr_cmp.f docs/examples/sparse_writer_top.v
// Widths are the defaults' (8 lanes of 8 bits, rows of 64); see gen/*_inst.v for others.
module sparse_writer_top (
    input  wire        clk,
    input  wire        rst,
    // dense tiles in (whole rows of 64 elements)
    input  wire [63:0] s_axis_tdata,
    input  wire        s_axis_tvalid,
    output wire        s_axis_tready,
    input  wire        s_axis_tlast,
    input  wire [7:0]  threshold,   // density threshold, 1/256 steps
    input  wire        dense,       // store this tile uncompressed (sampled on its first beat)
    // one record per tile: nnz[16:0] elems[33:17] zero_beats[47:34] sparse[48], then 0s
    // (tdata is padded to whole bytes)
    output wire [55:0] m_axis_stats_tdata,
    output wire        m_axis_stats_tvalid,
    input  wire        m_axis_stats_tready,
    // the tile in ZVC form
    output wire [63:0] m_axis_mask_tdata,
    output wire        m_axis_mask_tvalid,
    input  wire        m_axis_mask_tready,
    output wire        m_axis_mask_tlast,
    output wire [63:0] m_axis_data_tdata,
    output wire        m_axis_data_tvalid,
    input  wire        m_axis_data_tready,
    output wire        m_axis_data_tlast,
    output wire        error
);
    // monitor -> compactor
    wire [63:0] mid_tdata;
    wire        mid_tvalid, mid_tready, mid_tlast;

    wr_mon u_wr_mon (
        .clk                     (clk),
        .rst                     (rst),
        .s_axis_tdata            (s_axis_tdata),
        .s_axis_tvalid           (s_axis_tvalid),
        .s_axis_tready           (s_axis_tready),
        .s_axis_tlast            (s_axis_tlast),
        .m_axis_tdata            (mid_tdata),
        .m_axis_tvalid           (mid_tvalid),
        .m_axis_tready           (mid_tready),
        .m_axis_tlast            (mid_tlast),
        .m_axis_stats_tdata      (m_axis_stats_tdata),
        .m_axis_stats_tvalid     (m_axis_stats_tvalid),
        .m_axis_stats_tready     (m_axis_stats_tready),
        .threshold               (threshold)
    );

    wr_cmp u_wr_cmp (
        .clk                     (clk),
        .rst                     (rst),
        .s_axis_tdata            (mid_tdata),
        .s_axis_tuser            (dense),        // tuser = bypass
        .s_axis_tvalid           (mid_tvalid),
        .s_axis_tready           (mid_tready),
        .s_axis_tlast            (mid_tlast),
        .m_axis_mask_tdata       (m_axis_mask_tdata),
        .m_axis_mask_tvalid      (m_axis_mask_tvalid),
        .m_axis_mask_tready      (m_axis_mask_tready),
        .m_axis_mask_tlast       (m_axis_mask_tlast),
        .m_axis_data_tdata       (m_axis_data_tdata),
        .m_axis_data_tvalid      (m_axis_data_tvalid),
        .m_axis_data_tready      (m_axis_data_tready),
        .m_axis_data_tlast       (m_axis_data_tlast),
        .error                   (error)
    );
endmodule
