// The tiling of the depthwise convolution kernel (tessel_depthwise.cuh): which output pixels
// and channels a CTA computes, which input pixels it stages in shared memory and where each
// lands, and which outputs each thread computes from which staged pixels. Plain constexpr C++
// that compiles on the host too: the emitter (kernels/cuda/op_window.cc) sizes tiles and
// shared memory with it, and tests/kernels/cuda/depthwise_tile_test.cc runs this very index
// arithmetic against a naive convolution on the CPU. Host and device cannot disagree.
//
// Shapes (NHWC): input [n, h, w, c], weights OHWI [c, kernel_h, kernel_w, 1], output
// [n, oh, ow, c]. A fragment is `vec` consecutive channels of one pixel (16 bytes where c
// allows); a slab is `slab_vecs` fragments, the channels of one CTA.
//
//   CTA tile     : (tile_rows, tile_cols) output pixels x slab channels, tile_rows =
//                  row_groups * rows_per_thread
//   smem x       : (in_rows, in_cols, slab) the input pixels those outputs read (tile + halo),
//                  zero where the window leaves the image and past channel c
//   threads      : (row_groups, tile_cols, slab_vecs), slab_vecs fastest: one thread per
//                  fragment of one output column and rows_per_thread consecutive output rows
//   thread reads : for each kernel column, span_rows staged pixels of one smem column (the
//                  windows of its rows overlap: each pixel is read and converted once and
//                  feeds up to kernel_h taps)
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

// One staged fragment: smem pixel (row, col) of the input tile, fragment `frag` of the slab.
struct DwChunk {
  int row, col, frag;
};

// One thread's part of a tile: fragment `frag` of the slab, output column `col` of the tile,
// output rows row0 + [0, rows_per_thread).
struct DwThread {
  int frag, col, row0;
};

struct DepthwiseTiling {
  // The problem.
  int n, h, w, c;
  int oh, ow;
  int kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, dilation_h, dilation_w;
  int vec;  // channels per fragment
  // The tiling.
  int slab_vecs;        // fragments per slab
  int tile_cols;        // output columns per tile (threads along w)
  int row_groups;       // threads along h
  int rows_per_thread;  // consecutive output rows per thread

  TESSEL_HD constexpr int slab() const { return slab_vecs * vec; }
  TESSEL_HD constexpr int slabs() const { return (c + slab() - 1) / slab(); }
  TESSEL_HD constexpr int tile_rows() const { return row_groups * rows_per_thread; }
  TESSEL_HD constexpr int tiles_h() const { return (oh + tile_rows() - 1) / tile_rows(); }
  TESSEL_HD constexpr int tiles_w() const { return (ow + tile_cols - 1) / tile_cols; }
  TESSEL_HD constexpr long long tiles() const {
    return static_cast<long long>(n) * tiles_h() * tiles_w() * slabs();
  }
  TESSEL_HD constexpr int threads() const { return slab_vecs * tile_cols * row_groups; }

  // The input tile: every pixel some output of the tile reads (padding included).
  TESSEL_HD constexpr int in_rows() const {
    return (tile_rows() - 1) * stride_h + (kernel_h - 1) * dilation_h + 1;
  }
  TESSEL_HD constexpr int in_cols() const {
    return (tile_cols - 1) * stride_w + (kernel_w - 1) * dilation_w + 1;
  }
  TESSEL_HD constexpr int chunks() const { return in_rows() * in_cols() * slab_vecs; }
  // Input rows of one smem column that a thread's rows_per_thread outputs read.
  TESSEL_HD constexpr int span_rows() const {
    return (rows_per_thread - 1) * stride_h + (kernel_h - 1) * dilation_h + 1;
  }

  // Shared memory: smem x (elem_bytes per element), smem w (kernel_h * kernel_w, slab) fp32
  // weights, smem bias (slab) fp32.
  TESSEL_HD constexpr int smem_x_elems() const { return in_rows() * in_cols() * slab(); }
  TESSEL_HD constexpr int smem_bytes(int elem_bytes) const {
    return smem_x_elems() * elem_bytes + (kernel_h * kernel_w + 1) * slab() * 4;
  }

  // Tile i, slab fastest: the CTAs running at once share input rows (the halo of one tile is
  // the neighbour's interior) while they are in L2; then tile column, tile row, image.
  TESSEL_HD constexpr DwTile tile(long long i) const {
    DwTile t{0, 0, 0, 0};
    t.c0 = static_cast<int>(i % slabs()) * slab();
    i /= slabs();
    t.ow0 = static_cast<int>(i % tiles_w()) * tile_cols;
    i /= tiles_w();
    t.oh0 = static_cast<int>(i % tiles_h()) * tile_rows();
    t.n = static_cast<int>(i / tiles_h());
    return t;
  }
  // The input pixel at smem (0, 0) of a tile (negative in the top/left padding).
  TESSEL_HD constexpr int ih0(const DwTile& t) const { return t.oh0 * stride_h - pad_top; }
  TESSEL_HD constexpr int iw0(const DwTile& t) const { return t.ow0 * stride_w - pad_left; }

  // Staged fragment q in [0, chunks()), frag fastest: consecutive threads copy consecutive
  // 16-byte fragments of a pixel, then the next pixel of the row.
  TESSEL_HD constexpr DwChunk chunk(int q) const {
    return DwChunk{q / slab_vecs / in_cols(), q / slab_vecs % in_cols(), q % slab_vecs};
  }
  // Element offset in smem x of fragment `frag` of smem pixel (row, col).
  TESSEL_HD constexpr int smem_offset(int row, int col, int frag) const {
    return (row * in_cols() + col) * slab() + frag * vec;
  }

  TESSEL_HD constexpr DwThread thread(int tid) const {
    return DwThread{tid % slab_vecs, tid / slab_vecs % tile_cols,
                    tid / slab_vecs / tile_cols * rows_per_thread};
  }
  // The smem pixel that a thread reads as row j of its span in kernel column kw.
  TESSEL_HD constexpr int span_row(const DwThread& t, int j) const { return t.row0 * stride_h + j; }
  TESSEL_HD constexpr int span_col(const DwThread& t, int kw) const {
    return t.col * stride_w + kw * dilation_w;
  }
  // The kernel row through which span row j feeds the thread's output row p, or -1.
  TESSEL_HD constexpr int tap_row(int j, int p) const {
    const int d = j - p * stride_h;
    return d >= 0 && d % dilation_h == 0 && d / dilation_h < kernel_h ? d / dilation_h : -1;
  }
  // Whether any output of a thread reads span row j (with dilation some rows feed none).
  TESSEL_HD constexpr bool span_row_used(int j) const {
    for (int p = 0; p < rows_per_thread; ++p)
      if (tap_row(j, p) >= 0) return true;
    return false;
  }
};

}  // namespace tessel
