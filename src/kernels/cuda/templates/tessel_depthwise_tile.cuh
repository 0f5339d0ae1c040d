// The tiling of the depthwise convolution kernel (tessel_depthwise.cuh): which output pixels
// and channels a CTA computes, which input pixels it stages in shared memory and where each
// lands, and which outputs each thread computes from which staged pixels. Plain constexpr C++
// that compiles on the host too: the emitter (kernels/cuda/op_window.cc) sizes tiles, shared
// memory and registers with it, and tests/kernels/cuda/depthwise_test.cc runs this very index
// arithmetic against a naive convolution on the CPU. Host and device cannot disagree.
//
// Shapes (NHWC): input [n, h, w, c], weights OHWI [c, kernel_h, kernel_w, 1], output
// [n, oh, ow, c]. A staged chunk is `stage_vec` consecutive channels of one pixel (16 bytes
// where c allows), a fragment the `vec` channels one thread computes (vec divides stage_vec);
// a slab is `slab_vecs` fragments, the channels of one CTA (a whole number of chunks).
//
//   CTA tile     : (tile_rows, tile_cols) output pixels x slab channels, tile_rows =
//                  row_groups * rows_per_thread, tile_cols = col_groups * cols_per_thread
//   smem x       : (stages, in_rows, in_cols, slab) the input pixels those outputs read (tile
//                  + halo), zero where the window leaves the image and past channel c; with two
//                  stages the next tile is staged while this one is computed
//   threads      : (row_groups, col_groups, slab_vecs), slab_vecs fastest: one thread per
//                  fragment and block of (rows_per_thread, cols_per_thread) adjacent outputs
//   thread reads : the (span_rows, span_cols) staged pixels its outputs' windows cover, one
//                  span row at a time into registers, so that each staged pixel is read and
//                  converted once and feeds every tap of every output that uses it
#pragma once

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define TESSEL_HD __host__ __device__
#else
#define TESSEL_HD
#endif

namespace tessel {

// One CTA's work: image n, output origin (oh0, ow0), first channel c0.
struct DwTile {
  int n, oh0, ow0, c0;
};

// One staged chunk: smem pixel (row, col) of the input tile, chunk `chunk` of the slab.
struct DwChunk {
  int row, col, chunk;
};

// One thread's part of a tile: fragment `frag` of the slab, output rows row0 +
// [0, rows_per_thread) and columns col0 + [0, cols_per_thread) of the tile.
struct DwThread {
  int frag, col0, row0;
};

struct DepthwiseTiling {
  // The problem.
  int n, h, w, c;
  int oh, ow;
  int kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int stage_vec;  // channels per staged chunk (one cp.async)
  // The tiling.
  int vec;              // channels per thread (divides stage_vec)
  int slab_vecs;        // fragments per slab (slab a multiple of stage_vec)
  int col_groups;       // threads along w
  int cols_per_thread;  // adjacent output columns per thread
  int row_groups;       // threads along h
  int rows_per_thread;  // adjacent output rows per thread
  int stages;           // input tiles in shared memory: 1, or 2 to stage the next one early
  bool register_weights;  // each thread keeps its fragment's weights in registers
  bool tile_per_cta;      // one CTA per tile (the hardware balances them), else a persistent
                          // grid of as many CTAs as are resident at once

  TESSEL_HD constexpr int taps() const { return kernel_h * kernel_w; }
  TESSEL_HD constexpr int slab() const { return slab_vecs * vec; }
  TESSEL_HD constexpr int slab_chunks() const { return slab() / stage_vec; }
  TESSEL_HD constexpr int slabs() const { return (c + slab() - 1) / slab(); }
  TESSEL_HD constexpr int tile_rows() const { return row_groups * rows_per_thread; }
  TESSEL_HD constexpr int tile_cols() const { return col_groups * cols_per_thread; }
  TESSEL_HD constexpr int tiles_h() const { return (oh + tile_rows() - 1) / tile_rows(); }
  TESSEL_HD constexpr int tiles_w() const { return (ow + tile_cols() - 1) / tile_cols(); }
  TESSEL_HD constexpr long long tiles() const {
    return static_cast<long long>(n) * tiles_h() * tiles_w() * slabs();
  }
  TESSEL_HD constexpr int threads() const { return slab_vecs * col_groups * row_groups; }

  // The input tile: every pixel some output of the tile reads (padding included).
  TESSEL_HD constexpr int in_rows() const {
    return (tile_rows() - 1) * stride_h + (kernel_h - 1) * dilation_h + 1;
  }
  TESSEL_HD constexpr int in_cols() const {
    return (tile_cols() - 1) * stride_w + (kernel_w - 1) * dilation_w + 1;
  }
  TESSEL_HD constexpr int chunks() const { return in_rows() * in_cols() * slab_chunks(); }
  // The staged pixels one thread's outputs read: span_rows x span_cols.
  TESSEL_HD constexpr int span_rows() const {
    return (rows_per_thread - 1) * stride_h + (kernel_h - 1) * dilation_h + 1;
  }
  TESSEL_HD constexpr int span_cols() const {
    return (cols_per_thread - 1) * stride_w + (kernel_w - 1) * dilation_w + 1;
  }

  // Shared memory: smem x (elem_bytes per element, `stages` tiles), smem w (taps, slab) fp32.
  TESSEL_HD constexpr int smem_x_elems() const { return in_rows() * in_cols() * slab(); }
  TESSEL_HD constexpr int smem_bytes(int elem_bytes) const {
    return stages * smem_x_elems() * elem_bytes + taps() * slab() * 4;
  }

  // Tile i, slab fastest: the CTAs running at once share input rows (the halo of one tile is
  // the neighbour's interior) while they are in L2; then tile column, tile row, image. A grid
  // of `slabs()` multiple CTAs (or one CTA per tile) keeps each CTA on one slab.
  TESSEL_HD constexpr DwTile tile(long long i) const {
    DwTile t{0, 0, 0, 0};
    t.c0 = static_cast<int>(i % slabs()) * slab();
    i /= slabs();
    t.ow0 = static_cast<int>(i % tiles_w()) * tile_cols();
    i /= tiles_w();
    t.oh0 = static_cast<int>(i % tiles_h()) * tile_rows();
    t.n = static_cast<int>(i / tiles_h());
    return t;
  }
  // The input pixel at smem (0, 0) of a tile (negative in the top/left padding).
  TESSEL_HD constexpr int ih0(const DwTile& t) const { return t.oh0 * stride_h - pad_top; }
  TESSEL_HD constexpr int iw0(const DwTile& t) const { return t.ow0 * stride_w - pad_left; }

  // Staged chunk q in [0, chunks()), chunk fastest: consecutive threads copy consecutive
  // 16-byte chunks of a pixel, then the next pixel of the row.
  TESSEL_HD constexpr DwChunk chunk(int q) const {
    return DwChunk{q / slab_chunks() / in_cols(), q / slab_chunks() % in_cols(), q % slab_chunks()};
  }
  // Element offset in one stage of smem x of channel `channel` of smem pixel (row, col).
  TESSEL_HD constexpr int smem_offset(int row, int col, int channel) const {
    return (row * in_cols() + col) * slab() + channel;
  }

  TESSEL_HD constexpr DwThread thread(int tid) const {
    return DwThread{tid % slab_vecs, tid / slab_vecs % col_groups * cols_per_thread,
                    tid / slab_vecs / col_groups * rows_per_thread};
  }
  // The smem pixel that a thread reads as (row j, column u) of its span.
  TESSEL_HD constexpr int span_row(const DwThread& t, int j) const { return t.row0 * stride_h + j; }
  TESSEL_HD constexpr int span_col(const DwThread& t, int u) const { return t.col0 * stride_w + u; }
  // The kernel row through which span row j feeds the thread's output row r, or -1; the same
  // for span column u, output column q and the kernel column.
  TESSEL_HD constexpr int tap_row(int j, int r) const {
    const int d = j - r * stride_h;
    return d >= 0 && d % dilation_h == 0 && d / dilation_h < kernel_h ? d / dilation_h : -1;
  }
  TESSEL_HD constexpr int tap_col(int u, int q) const {
    const int d = u - q * stride_w;
    return d >= 0 && d % dilation_w == 0 && d / dilation_w < kernel_w ? d / dilation_w : -1;
  }
  // Whether any output of a thread reads span row j / span column u (with dilation and
  // stride some feed none).
  TESSEL_HD constexpr bool span_row_used(int j) const {
    for (int r = 0; r < rows_per_thread; ++r)
      if (tap_row(j, r) >= 0) return true;
    return false;
  }
  TESSEL_HD constexpr bool span_col_used(int u) const {
    for (int q = 0; q < cols_per_thread; ++q)
      if (tap_col(u, q) >= 0) return true;
    return false;
  }
};

}  // namespace tessel
