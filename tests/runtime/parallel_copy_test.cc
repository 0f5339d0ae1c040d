// ParallelCopy: every byte of every block copied, ready() called once per block in order and
// only after that block is copied, runs back to back on one pool, a failing ready() rethrown
// after the copies finish.
#include "runtime/parallel_copy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

namespace tessel::runtime {
namespace {

struct Job {
  std::vector<std::vector<unsigned char>> src, dst;
  std::vector<ParallelCopy::Block> blocks;
};

Job make_job(std::mt19937& rng, size_t n) {
  Job j;
  std::uniform_int_distribution<size_t> size(0, 70000);
  std::uniform_int_distribution<int> byte(1, 255);
  for (size_t k = 0; k < n; ++k) {
    const size_t bytes = k % 7 == 3 ? 0 : size(rng);  // some empty blocks too
    j.src.emplace_back(bytes);
    for (unsigned char& c : j.src.back()) c = static_cast<unsigned char>(byte(rng));
    j.dst.emplace_back(bytes, 0);
  }
  for (size_t k = 0; k < n; ++k)
    j.blocks.push_back({j.dst[k].data(), j.src[k].data(), j.src[k].size()});
  return j;
}

TEST(ParallelCopy, CopiesEveryBlockAndHandsThemOnInOrder) {
  std::mt19937 rng(3);
  for (int workers : {0, 1, 3}) {
    ParallelCopy pool(workers);
    EXPECT_EQ(pool.workers(), workers);
    for (size_t n : {1u, 2u, 17u, 64u}) {  // back to back on the same pool
      SCOPED_TRACE(testing::Message() << workers << " workers, " << n << " blocks");
      Job j = make_job(rng, n);
      std::vector<size_t> order;
      pool.run(j.blocks, [&](size_t k) {
        // Block k is complete when it is handed on.
        EXPECT_EQ(std::memcmp(j.dst[k].data(), j.src[k].data(), j.src[k].size()), 0) << k;
        order.push_back(k);
      });
      ASSERT_EQ(order.size(), n);
      for (size_t k = 0; k < n; ++k) EXPECT_EQ(order[k], k);
      for (size_t k = 0; k < n; ++k) EXPECT_EQ(j.dst[k], j.src[k]) << "block " << k;
    }
  }
}

TEST(ParallelCopy, AFailingReadyIsRethrownAfterTheCopies) {
  std::mt19937 rng(5);
  ParallelCopy pool(2);
  Job j = make_job(rng, 20);
  size_t calls = 0;
  EXPECT_THROW(pool.run(j.blocks,
                        [&](size_t k) {
                          ++calls;
                          if (k == 4) throw std::runtime_error("upload failed");
                        }),
               std::runtime_error);
  EXPECT_EQ(calls, 5u);  // none after the failure
  for (size_t k = 0; k < j.src.size(); ++k) EXPECT_EQ(j.dst[k], j.src[k]) << "block " << k;
  // The pool still works.
  Job again = make_job(rng, 9);
  size_t handed = 0;
  pool.run(again.blocks, [&](size_t) { ++handed; });
  EXPECT_EQ(handed, 9u);
  EXPECT_EQ(again.dst, again.src);
}

TEST(ParallelCopy, NoBlocksIsNothing) {
  ParallelCopy pool(2);
  bool called = false;
  pool.run({}, [&](size_t) { called = true; });
  EXPECT_FALSE(called);
  EXPECT_GE(ParallelCopy::default_workers(), 0);
  EXPECT_LE(ParallelCopy::default_workers(), 4);
}

}  // namespace
}  // namespace tessel::runtime
