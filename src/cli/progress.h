// A progress bar for the steps of a command that may take more than a second (the passes,
// compiling kernels, loading them), fed by runtime::ProgressFn reports.
//
// On a terminal it redraws one line in place, "compiling kernels [#######.......] 12/40", and
// clears it when the step ends, so nothing is left behind in the command's output. Anywhere
// else (a log file, CI) it prints one summary line per step that took at least
// `summary_after_s` seconds, "compiling kernels: 40/40 in 3.2 s", and nothing for quick ones.
// Thread-safe: kernels compile on a thread pool, and each reports when it is done.
//
// Header-only, so the CLI tests check it without linking the CLI.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace tessel::cli {

class ProgressBar {
 public:
  explicit ProgressBar(FILE* out = stderr, double summary_after_s = 1.0)
      : ProgressBar(out, ::isatty(::fileno(out)) != 0, summary_after_s) {}
  ProgressBar(FILE* out, bool tty, double summary_after_s)
      : out_(out), tty_(tty), summary_after_s_(summary_after_s) {}
  ~ProgressBar() {
    std::lock_guard lock(mu_);
    end_step();
  }
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of `total` units of `step`. A report of a new step ends the current one; done ==
  // total ends it too. Reports may arrive out of order from several threads: the bar shows the
  // most done, and a late report of a step already ended is dropped.
  void update(std::string_view step, int done, int total) {
    std::lock_guard lock(mu_);
    if (step != step_) {
      if (step == ended_ && done != 0) return;
      end_step();
      step_ = step;
      done_ = 0;
      start_ = std::chrono::steady_clock::now();
    }
    done_ = std::max(done_, done);
    total_ = total;
    if (tty_) draw();
    if (done_ >= total_) end_step();
  }

  // The callback for EngineOptions::progress and Engine::load; the bar must outlive its use.
  auto callback() {
    return [this](std::string_view step, int done, int total) { update(step, done, total); };
  }

 private:
  static constexpr int kWidth = 30;

  void draw() {
    const int filled = total_ > 0 ? std::min(kWidth, kWidth * done_ / total_) : 0;
    std::fprintf(out_, "\r\033[K%s [%s%s] %d/%d", step_.c_str(), std::string(filled, '#').c_str(),
                 std::string(kWidth - filled, '.').c_str(), done_, total_);
    std::fflush(out_);
  }

  void end_step() {
    if (step_.empty()) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (tty_)
      std::fputs("\r\033[K", out_);
    else if (seconds >= summary_after_s_)
      std::fprintf(out_, "%s: %d/%d in %.1f s\n", step_.c_str(), done_, total_, seconds);
    std::fflush(out_);
    ended_ = step_;
    step_.clear();
  }

  std::mutex mu_;
  FILE* out_;
  bool tty_;
  double summary_after_s_;
  std::string step_;   // the step in progress; empty between steps
  std::string ended_;  // the step that ended last
  int done_ = 0, total_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessel::cli
