// Helpers of the tests that run the `tessel` command: run it, capture its output, and check
// the one-line error contract.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

namespace tessel::testing {

struct Result {
  int code;
  std::string out;  // stdout and stderr together
};

// The binary under test: $TESSEL_BIN where set, else the build tree's, else the `tessel` beside
// this test binary (test binaries copied to another machine, as scripts/pack_device.sh lays
// them out in bin/).
inline std::string tessel_binary() {
  const char* bin = std::getenv("TESSEL_BIN");
  if (bin && *bin) return bin;
  const std::string built = std::string(TESSEL_BINARY_DIR) + "/src/cli/tessel";
  std::error_code ec;
  if (std::filesystem::exists(built, ec)) return built;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec && std::filesystem::exists(self.parent_path() / "tessel", ec))
    return (self.parent_path() / "tessel").string();
  return built;
}

// `out` without the lines a progress bar prints off a terminal when a step took over a second
// ("compiling kernels: 2/2 in 2.6 s", cli/progress.h): whether they appear depends on the
// machine's load, not on what the command did (progress_test.cc tests them).
inline std::string without_progress_summaries(const std::string& out) {
  static const std::regex summary(R"(^[a-z][a-z ]*: \d+/\d+ in \d+\.\d s$)");
  std::string kept;
  size_t start = 0;
  while (start < out.size()) {
    size_t end = out.find('\n', start);
    const size_t stop = end == std::string::npos ? out.size() : end + 1;
    const std::string line = out.substr(start, (end == std::string::npos ? out.size() : end) - start);
    if (!std::regex_match(line, summary)) kept += out.substr(start, stop - start);
    start = stop;
  }
  return kept;
}

// Runs `tessel <args>`; `env` is prepended to the command line ("TESSEL_CACHE_DIR=/tmp/x"),
// progress summaries left out.
inline Result run_tessel(const std::string& args, const std::string& env = "") {
  std::string cmd = env + (env.empty() ? "" : " ") + tessel_binary() + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  Result r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  while (size_t n = fread(buf.data(), 1, buf.size(), p)) r.out.append(buf.data(), n);
  int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = without_progress_summaries(r.out);
  return r;
}

// A directory of this test process's own.
inline std::filesystem::path temp_dir() {
  auto d =
      std::filesystem::temp_directory_path() / ("tessel_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d;
}

inline std::string write_file(const std::string& name, const std::string& contents) {
  auto path = temp_dir() / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

// A user error: exit code 2 and exactly one line, starting "error:" and containing `needle`.
inline void expect_user_error(const std::string& args, const std::string& needle,
                              const std::string& env = "") {
  Result r = run_tessel(args, env);
  EXPECT_EQ(r.code, 2) << args << "\n" << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << r.out;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(needle), std::string::npos) << "missing '" << needle << "' in " << r.out;
}

}  // namespace tessel::testing
