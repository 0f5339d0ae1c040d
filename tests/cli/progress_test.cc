// The CLI's progress bar (src/cli/progress.h): redrawn in place and cleared on a terminal, one
// summary line per slow step elsewhere, safe to feed from many threads.
#include "cli/progress.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace tessel::cli {
namespace {

// Everything written to `f` so far.
std::string contents(FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += static_cast<char>(c);
  return s;
}

const std::string kClear = "\r\033[K";

TEST(ProgressBar, TerminalRedrawsInPlaceAndClears) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, /*tty=*/true, 1.0);
    bar.update("compiling kernels", 0, 4);
    bar.update("compiling kernels", 2, 4);
    bar.update("compiling kernels", 4, 4);
  }
  // 30 columns: 2 of 4 fills 15.
  EXPECT_EQ(contents(f), kClear + "compiling kernels [" + std::string(30, '.') + "] 0/4" + kClear +
                             "compiling kernels [" + std::string(15, '#') + std::string(15, '.') +
                             "] 2/4" + kClear + "compiling kernels [" + std::string(30, '#') +
                             "] 4/4" + kClear);
  std::fclose(f);
}

TEST(ProgressBar, ElsewhereOneLinePerSlowStep) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, /*tty=*/false, 0.0);
    bar.update("running passes", 0, 7);
    bar.update("running passes", 3, 7);
    bar.update("compiling kernels", 0, 2);  // a new step ends the one before
    bar.update("compiling kernels", 2, 2);
    bar.update("compiling kernels", 1, 2);  // a late report of an ended step: dropped
  }
  const std::string out = contents(f);
  EXPECT_EQ(out.rfind("running passes: 3/7 in 0.", 0), 0u) << out;
  EXPECT_NE(out.find(" s\ncompiling kernels: 2/2 in 0."), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  std::fclose(f);

  // Quick steps print nothing when only slow ones are summarized.
  f = std::tmpfile();
  {
    ProgressBar bar(f, /*tty=*/false, 1e9);
    bar.update("loading kernels", 0, 3);
    bar.update("loading kernels", 3, 3);
  }
  EXPECT_EQ(contents(f), "");
  std::fclose(f);
}

// Kernels report from a thread pool, in any order: the bar ends at the total and cleared.
TEST(ProgressBar, ManyThreads) {
  FILE* f = std::tmpfile();
  {
    ProgressBar bar(f, /*tty=*/true, 1.0);
    auto report = bar.callback();
    report("compiling kernels", 0, 400);
    std::atomic<int> done{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t)
      pool.emplace_back([&] {
        for (int i = 0; i < 50; ++i) report("compiling kernels", ++done, 400);
      });
    for (std::thread& t : pool) t.join();
  }
  const std::string out = contents(f);
  const std::string last = "compiling kernels [" + std::string(30, '#') + "] 400/400" + kClear;
  ASSERT_GE(out.size(), last.size());
  EXPECT_EQ(out.substr(out.size() - last.size()), last);
  EXPECT_EQ(out.find("400/400"), out.size() - last.size() + last.find("400/400"))
      << "the bar was redrawn after it ended";
  std::fclose(f);
}

}  // namespace
}  // namespace tessel::cli
