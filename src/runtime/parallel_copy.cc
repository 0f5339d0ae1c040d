#include "runtime/parallel_copy.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>
#include <exception>

namespace tessel::runtime {

ParallelCopy::ParallelCopy(int workers) {
  for (int i = 0; i < workers; ++i) threads_.emplace_back([this] { work(); });
}

ParallelCopy::~ParallelCopy() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

int ParallelCopy::default_workers() {
  const unsigned n = std::thread::hardware_concurrency();
  return static_cast<int>(std::clamp(n / 4, 0u, 4u));
}

void ParallelCopy::copy_blocks() {
  std::unique_lock lock(mu_);
  const std::vector<Block>& blocks = *blocks_;
  while (next_ < blocks.size()) {
    const size_t k = next_++;
    lock.unlock();
    if (blocks[k].bytes) std::memcpy(blocks[k].dst, blocks[k].src, blocks[k].bytes);
    lock.lock();
    copied_[k] = 1;
    done_.notify_all();
  }
}

void ParallelCopy::work() {
  pthread_setname_np(pthread_self(), "tessel-copy");  // named for per-thread CPU readings
  uint64_t seen = 0;
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (!blocks_) continue;  // woken after that run had ended
    ++busy_;
    lock.unlock();
    copy_blocks();
    lock.lock();
    --busy_;
    done_.notify_all();
  }
}

void ParallelCopy::run(const std::vector<Block>& blocks, const std::function<void(size_t)>& ready) {
  if (blocks.empty()) return;
  {
    std::lock_guard lock(mu_);
    blocks_ = &blocks;
    next_ = 0;
    copied_.assign(blocks.size(), 0);
    ++generation_;
  }
  if (blocks.size() > 1) wake_.notify_all();
  std::exception_ptr failure;
  size_t handed = 0;
  std::unique_lock lock(mu_);
  while (handed < blocks.size()) {
    if (next_ < blocks.size()) {  // copy one block here
      const size_t k = next_++;
      lock.unlock();
      if (blocks[k].bytes) std::memcpy(blocks[k].dst, blocks[k].src, blocks[k].bytes);
      lock.lock();
      copied_[k] = 1;
    } else if (!copied_[handed]) {
      done_.wait(lock, [&] { return copied_[handed] != 0; });
    }
    while (handed < blocks.size() && copied_[handed]) {
      const size_t k = handed++;
      if (failure) continue;
      lock.unlock();
      try {
        ready(k);
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
    }
  }
  // Workers may still be between their last look at the job and leaving it.
  done_.wait(lock, [&] { return busy_ == 0; });
  blocks_ = nullptr;
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tessel::runtime
