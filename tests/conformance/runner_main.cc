// conformance_runner: runs ONNX's backend test cases through tessel (see conformance.h).
//
//   conformance_runner [DATA_ROOT] [--filter SUBSTR] [--verbose] [--list-skipped] [--no-fork]
//
// Prints one line per failing case, then `conformance: N passed, M failed, K skipped`; exits
// 1 if any case failed. Each case runs in a child process so that a crash or a hang in one
// op's kernel is reported as that case's failure instead of ending the whole run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "conformance/conformance.h"

namespace tessel::conformance {
namespace {

constexpr const char* kDefaultRoot = "/usr/share/libonnx-testdata/data";
const std::vector<std::string> kSuites = {"node", "pytorch-converted", "pytorch-operator"};
// No ONNX test case needs more than a fraction of a second; this only catches hangs.
constexpr unsigned kCaseTimeoutSeconds = 30;

struct Options {
  std::string root = kDefaultRoot;
  std::string filter;
  bool verbose = false;
  bool list_skipped = false;
  bool fork = true;
};

void usage(std::ostream& out) {
  out << "usage: conformance_runner [DATA_ROOT] [--filter SUBSTR] [--verbose] [--list-skipped]"
         " [--no-fork]\n"
         "  DATA_ROOT       folder with node/, pytorch-converted/, pytorch-operator/ (default "
      << kDefaultRoot
      << "),\n"
         "                  or one folder of test_* cases\n"
         "  --filter SUBSTR run only cases whose suite/name contains SUBSTR\n"
         "  --verbose       print skip reasons and failures grouped, with counts (a case\n"
         "                  missing several ops counts toward each)\n"
         "  --list-skipped  print each skipped case with its reason\n"
         "  --no-fork       run cases in this process (for a debugger)\n";
}

// The child's report: a status digit, then one line each for the reason, the ops and every
// skip group (none of them contain a newline).
std::string serialize(const CaseResult& r) {
  std::string msg = std::to_string(static_cast<int>(r.status)) + r.reason + "\n" + r.ops;
  for (const std::string& g : r.skip_groups) msg += "\n" + g;
  return msg;
}

std::optional<CaseResult> deserialize(const std::string& msg) {
  if (msg.empty() || msg[0] < '0' || msg[0] > '2') return std::nullopt;
  CaseResult r;
  r.status = static_cast<CaseResult::Status>(msg[0] - '0');
  std::vector<std::string> lines;
  std::istringstream in(msg.substr(1));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  if (lines.size() < 2) return std::nullopt;
  r.reason = lines[0];
  r.ops = lines[1];
  r.skip_groups.assign(lines.begin() + 2, lines.end());
  return r;
}

CaseResult failure(std::string reason) {
  return {CaseResult::Status::kFail, std::move(reason), "", {}};
}

CaseResult run_isolated(const TestCase& c) {
  int fds[2];
  if (pipe(fds) != 0) return failure("pipe() failed");
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = fork();
  if (pid < 0) return failure("fork() failed");
  if (pid == 0) {
    close(fds[0]);
    alarm(kCaseTimeoutSeconds);
    std::string msg = serialize(run_case(c, ir::OpRegistry::global()));
    for (size_t off = 0; off < msg.size();) {
      ssize_t n = write(fds[1], msg.data() + off, msg.size() - off);
      if (n <= 0) _exit(3);
      off += static_cast<size_t>(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGALRM)
      return failure("timed out after " + std::to_string(kCaseTimeoutSeconds) + " s");
    return failure("crashed with signal " + std::to_string(sig) + " (" + strsignal(sig) + ")");
  }
  std::optional<CaseResult> r = deserialize(msg);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !r)
    return failure("the case's process exited without a result");
  return *r;
}

// "reason: count" lines, most frequent first.
void print_grouped(const std::string& title, const std::map<std::string, int>& counts) {
  std::vector<std::pair<std::string, int>> sorted(counts.begin(), counts.end());
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::cout << title << ":\n";
  for (const auto& [key, count] : sorted) std::cout << "  " << count << "  " << key << "\n";
}

int run(const Options& opt) {
  std::vector<TestCase> cases = discover_cases(opt.root, kSuites);
  if (cases.empty()) {
    std::cerr << "conformance_runner: no test cases (folders with model.onnx) under " << opt.root
              << "\n";
    return 2;
  }
  int passed = 0, failed = 0, skipped = 0;
  std::map<std::string, int> skip_reasons, failing_ops;
  for (const TestCase& c : cases) {
    if (c.id().find(opt.filter) == std::string::npos) continue;
    CaseResult r = opt.fork ? run_isolated(c) : run_case(c, ir::OpRegistry::global());
    switch (r.status) {
      case CaseResult::Status::kPass:
        ++passed;
        break;
      case CaseResult::Status::kSkip:
        ++skipped;
        for (const std::string& g : r.skip_groups) ++skip_reasons[g];
        if (opt.list_skipped) std::cout << "SKIP " << c.id() << ": " << r.reason << "\n";
        break;
      case CaseResult::Status::kFail:
        ++failed;
        ++failing_ops[r.ops.empty() ? "(unknown)" : r.ops];
        std::cout << "FAIL " << c.id() << ": " << r.reason << "\n";
        break;
    }
  }
  if (opt.verbose) {
    if (!skip_reasons.empty())
      print_grouped("skipped, by reason (a case may count twice)", skip_reasons);
    if (!failing_ops.empty()) print_grouped("failed, by the ops of the model", failing_ops);
  }
  std::cout << "conformance: " << passed << " passed, " << failed << " failed, " << skipped
            << " skipped" << std::endl;
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace tessel::conformance

int main(int argc, char** argv) {
  tessel::conformance::Options opt;
  bool root_given = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc) {
      opt.filter = argv[++i];
    } else if (a == "--verbose") {
      opt.verbose = true;
    } else if (a == "--list-skipped") {
      opt.list_skipped = true;
    } else if (a == "--no-fork") {
      opt.fork = false;
    } else if (a == "--help" || a == "-h") {
      tessel::conformance::usage(std::cout);
      return 0;
    } else if (!a.empty() && a[0] != '-' && !root_given) {
      opt.root = a;
      root_given = true;
    } else {
      tessel::conformance::usage(std::cerr);
      return 2;
    }
  }
  return tessel::conformance::run(opt);
}
