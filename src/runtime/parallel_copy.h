// Host-to-host copies of many blocks on a few threads, handed on in order as they complete: how
// Engine::run_gathered fills its page-locked staging buffer from a batch's pieces fast enough
// that the host copy stops being what a served batch waits for (one thread copies about 8 GB/s
// from a Triton client's shared memory, under the PCIe link's rate).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel::runtime {

class ParallelCopy {
 public:
  struct Block {
    void* dst = nullptr;
    const void* src = nullptr;
    size_t bytes = 0;
  };

  // `workers` threads besides the caller's (0: the caller copies alone).
  explicit ParallelCopy(int workers);
  ~ParallelCopy();
  ParallelCopy(const ParallelCopy&) = delete;
  ParallelCopy& operator=(const ParallelCopy&) = delete;

  // Copies every block (the caller's thread copies too) and calls ready(k) on the caller's
  // thread for k = 0, 1, ..., n - 1 in order, each as soon as blocks 0..k are copied (so an
  // upload of block k can start while later blocks are still being copied). Returns when all
  // are copied and handed on. One run at a time per ParallelCopy. If ready throws, the run
  // finishes its copies and rethrows.
  void run(const std::vector<Block>& blocks, const std::function<void(size_t)>& ready);

  int workers() const { return static_cast<int>(threads_.size()); }

  // The worker count for this machine: a quarter of its hardware threads, at most 4.
  static int default_workers();

 private:
  void work();
  // Copies blocks until none is left (caller or worker); false once the job ran out.
  void copy_blocks();

  std::vector<std::thread> threads_;
  std::mutex mu_;
  std::condition_variable wake_;  // workers: a job or the end
  std::condition_variable done_;  // caller: a block copied, or a worker left the job
  bool stop_ = false;
  uint64_t generation_ = 0;  // one per run
  const std::vector<Block>* blocks_ = nullptr;
  size_t next_ = 0;           // the next block to take (under mu_)
  std::vector<char> copied_;  // per block (under mu_)
  int busy_ = 0;              // workers inside the current job (under mu_)
};

}  // namespace tessel::runtime
