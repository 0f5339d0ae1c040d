// NVRTC: run-time compilation of generated CUDA C++ to cubins, through the kernel cache.
#include <nvrtc.h>

#include <algorithm>
#include <memory>
#include <regex>
#include <sstream>

#include "core/error.h"
#include "device/cuda_api.h"
#include "device/kernel_cache.h"

namespace tessel::device {
namespace {

// Lines of source shown on each side of the first error.
constexpr int kContextLines = 4;

void check_nvrtc(nvrtcResult r, const char* call) {
  TESSEL_ICHECK(r == NVRTC_SUCCESS)
      << "NVRTC call " << call << " failed: " << nvrtcGetErrorString(r);
}
#define TESSEL_NVRTC_CHECK(call) check_nvrtc((call), #call)

std::vector<int> supported_archs() {
  int n = 0;
  TESSEL_NVRTC_CHECK(nvrtcGetNumSupportedArchs(&n));
  std::vector<int> archs(static_cast<size_t>(n));
  TESSEL_NVRTC_CHECK(nvrtcGetSupportedArchs(archs.data()));
  return archs;
}

// "sm_90a" must name a real architecture that this NVRTC can emit SASS for (nvrtcGetCUBIN
// needs a real sm_ target; compute_XY would give PTX only).
void check_arch(const std::string& arch) {
  static const std::regex pattern(R"(sm_(\d{2,3})[af]?)");
  std::smatch m;
  const std::vector<int> archs = supported_archs();
  bool ok = std::regex_match(arch, m, pattern) &&
            std::find(archs.begin(), archs.end(), std::stoi(m[1].str())) != archs.end();
  if (ok) return;
  std::ostringstream list;
  for (size_t i = 0; i < archs.size(); ++i) list << (i ? ", " : "") << "sm_" << archs[i];
  TESSEL_USER_ERROR() << "unsupported GPU architecture '" << arch << "': NVRTC "
                      << nvrtc_version() / 1000 << "." << nvrtc_version() % 1000 / 10
                      << " emits code for " << list.str()
                      << " (with an 'a' suffix for arch-specific features, e.g. sm_90a)";
}

std::vector<std::string> nvrtc_options(const CompileOptions& o) {
  std::vector<std::string> opts = {"--gpu-architecture=" + o.arch, "-std=c++17", "-default-device"};
  opts.insert(opts.end(), o.extra.begin(), o.extra.end());
  return opts;
}

uint64_t cache_key(const std::string& source, const std::string& name,
                   const std::vector<std::string>& opts, const CompileOptions& o) {
  Hasher h;
  h.add("tessel-nvrtc").add(static_cast<uint64_t>(detail::kCacheFormatVersion));
  h.add(static_cast<uint64_t>(nvrtc_version()));
  // The program name appears in the cached log, so it is part of what the entry holds.
  h.add(source).add(name);
  h.add(static_cast<uint64_t>(opts.size()));
  for (const std::string& opt : opts) h.add(opt);  // the arch is the first option
  h.add(static_cast<uint64_t>(o.headers.size()));
  for (const auto& [header_name, contents] : o.headers) h.add(header_name).add(contents);
  return h.value();
}

// The lines around `line` (1-based) of `text`, numbered, the line itself marked with '>'.
std::string excerpt(const std::string& text, int line) {
  std::istringstream in(text);
  std::ostringstream out;
  std::string s;
  for (int n = 1; std::getline(in, s); ++n) {
    if (n < line - kContextLines) continue;
    if (n > line + kContextLines) break;
    out << (n == line ? "> " : "  ");
    out.width(5);
    out << n << " | " << s << "\n";
  }
  return out.str();
}

// The failure report of a compile: the full log, then the source lines around the first
// error, taken from the program or from the header the error is in; for an error of ptxas
// (typically in inline PTX), the lines of the PTX it was given.
std::string compile_failure(const std::string& source, const std::string& name,
                            const CompileOptions& o, const std::vector<std::string>& opts,
                            const std::string& log, const std::string& ptx) {
  std::ostringstream msg;
  msg << "NVRTC failed to compile generated kernel '" << name << "' with";
  for (const std::string& opt : opts) msg << " " << opt;
  msg << ":\n" << log;
  if (!log.empty() && log.back() != '\n') msg << "\n";

  // NVRTC reports errors as "<file>(<line>): error: ..." (or "catastrophic error").
  static const std::regex first_error(R"((^|\n)([^\n(]+)\((\d+)\): (catastrophic )?error)");
  static const std::regex ptxas_error(R"(ptxas application ptx input, line (\d+); error)");
  std::smatch m;
  if (!ptx.empty() && std::regex_search(log, m, ptxas_error)) {
    const int line = std::stoi(m[1].str());
    msg << "first error at PTX line " << line << ":\n" << excerpt(ptx, line);
    return msg.str();
  }
  if (!std::regex_search(log, m, first_error)) return msg.str();
  const std::string file = m[2].str();
  const int line = std::stoi(m[3].str());
  const std::string* text = file == name ? &source : nullptr;
  for (const auto& [header_name, contents] : o.headers)
    if (header_name == file) text = &contents;
  if (text) msg << "first error at " << file << ":" << line << ":\n" << excerpt(*text, line);
  return msg.str();
}

using ProgramPtr = std::unique_ptr<_nvrtcProgram, void (*)(_nvrtcProgram*)>;

ProgramPtr create_program(const std::string& source, const std::string& name,
                          const CompileOptions& o) {
  std::vector<const char*> header_sources, header_names;
  for (const auto& [header_name, contents] : o.headers) {
    header_names.push_back(header_name.c_str());
    header_sources.push_back(contents.c_str());
  }
  nvrtcProgram prog = nullptr;
  TESSEL_NVRTC_CHECK(nvrtcCreateProgram(&prog, source.c_str(), name.c_str(),
                                        static_cast<int>(o.headers.size()), header_sources.data(),
                                        header_names.data()));
  return ProgramPtr(prog, [](_nvrtcProgram* p) { nvrtcDestroyProgram(&p); });
}

CompiledKernel compile_uncached(const std::string& source, const std::string& name,
                                const CompileOptions& o, const std::vector<std::string>& opts) {
  ProgramPtr prog = create_program(source, name, o);
  std::vector<const char*> argv;
  argv.reserve(opts.size());
  for (const std::string& opt : opts) argv.push_back(opt.c_str());
  const nvrtcResult result =
      nvrtcCompileProgram(prog.get(), static_cast<int>(argv.size()), argv.data());

  // The log is fetched on success too: warnings in generated code are worth seeing.
  size_t log_size = 0;
  TESSEL_NVRTC_CHECK(nvrtcGetProgramLogSize(prog.get(), &log_size));
  std::string log(log_size, '\0');
  TESSEL_NVRTC_CHECK(nvrtcGetProgramLog(prog.get(), log.data()));
  while (!log.empty() && log.back() == '\0') log.pop_back();

  // Generated code that does not compile is a compiler bug, hence InternalError. An invalid
  // option lands here too, with NVRTC's own error name in front of its log.
  if (result != NVRTC_SUCCESS) {
    // When the front end succeeded and ptxas failed, the PTX exists and locates the error.
    std::string ptx;
    size_t ptx_size = 0;
    if (nvrtcGetPTXSize(prog.get(), &ptx_size) == NVRTC_SUCCESS && ptx_size > 1) {
      ptx.resize(ptx_size);
      if (nvrtcGetPTX(prog.get(), ptx.data()) != NVRTC_SUCCESS) ptx.clear();
      while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    }
    std::string report = compile_failure(source, name, o, opts, log, ptx);
    if (result != NVRTC_ERROR_COMPILATION) report = nvrtcGetErrorString(result) + (": " + report);
    throw InternalError(report);
  }

  CompiledKernel k;
  k.log = std::move(log);
  size_t cubin_size = 0;
  TESSEL_NVRTC_CHECK(nvrtcGetCUBINSize(prog.get(), &cubin_size));
  k.cubin.resize(cubin_size);
  TESSEL_NVRTC_CHECK(nvrtcGetCUBIN(prog.get(), k.cubin.data()));
  TESSEL_ICHECK(!k.cubin.empty()) << "NVRTC returned an empty cubin for '" << name << "'";
  return k;
}

}  // namespace

int nvrtc_version() {
  static const int version = [] {
    int major = 0, minor = 0;
    TESSEL_NVRTC_CHECK(nvrtcVersion(&major, &minor));
    return major * 1000 + minor * 10;
  }();
  return version;
}

CompiledKernel compile(const std::string& source, const std::string& name,
                       const CompileOptions& options) {
  check_arch(options.arch);
  const std::vector<std::string> opts = nvrtc_options(options);
  const std::string dir = cache_dir();
  if (dir.empty()) return compile_uncached(source, name, options, opts);

  const uint64_t key = cache_key(source, name, opts, options);
  if (std::optional<detail::CacheEntry> hit = detail::cache_load(dir, key)) {
    CompiledKernel k;
    k.cubin = std::move(hit->cubin);
    k.log = std::move(hit->log);
    k.from_cache = true;
    return k;
  }
  CompiledKernel k = compile_uncached(source, name, options, opts);
  detail::cache_store(dir, key, {k.cubin, k.log});
  return k;
}

}  // namespace tessel::device
