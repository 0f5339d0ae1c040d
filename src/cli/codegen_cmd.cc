// `tessel codegen`: for one workload, the Contraction the matcher derived, the Schedule
// chosen, the generated CUDA source and, with a GPU's toolchain present, the SASS
// instruction mix (HMMA, LDSM, LDGSTS) of the compiled kernel. How a person debugs a kernel.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "bench/workloads.h"
#include "cli/commands.h"
#include "cli/op_kernels.h"
#include "core/error.h"
#include "device/cuda_api.h"
#include "kernels/cuda/contraction_kernel.h"
#include "kernels/cuda/op_kernels.h"
#include "kernels/default_schedule.h"

namespace tessel::cli {
namespace {

// The lines `cuobjdump <flag>` prints for the cubin; none when cuobjdump is not available.
std::vector<std::string> cuobjdump_lines(const std::string& cubin, const char* flag) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("tessel_sass_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::path bin = dir / "kernel.cubin";
  std::ofstream(bin, std::ios::binary).write(cubin.data(), static_cast<std::streamsize>(cubin.size()));
  const std::string cmd = std::string("cuobjdump ") + flag + " " + bin.string() + " 2>/dev/null";
  std::vector<std::string> lines;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char line[1024];
    while (std::fgets(line, sizeof line, p)) lines.emplace_back(line);
    pclose(p);
  }
  fs::remove_all(dir);
  return lines;
}

// Counts SASS opcodes of interest in `cuobjdump --dump-sass` output of the cubin; empty when
// cuobjdump is not available.
std::map<std::string, int> sass_mix(const std::string& cubin) {
  std::map<std::string, int> mix;
  const std::regex op(R"(^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)[.\s;])");
  for (const std::string& line : cuobjdump_lines(cubin, "--dump-sass")) {
    std::smatch m;
    if (std::regex_search(line, m, op)) {
      const std::string name = m[1];
      for (const char* key : {"HMMA", "HGMMA", "LDSM", "LDGSTS", "LDG", "STG", "STS", "LDS", "FFMA", "BAR", "LDL", "STL"})
        if (name == key) mix[name]++;
    }
  }
  return mix;
}

// The kernel's registers, stack and spill bytes as cuobjdump reports them ("REG:168 STACK:0
// ..."); empty when cuobjdump is not available.
std::string resource_usage(const std::string& cubin) {
  for (const std::string& line : cuobjdump_lines(cubin, "--dump-resource-usage")) {
    const size_t at = line.find("REG:");
    if (at != std::string::npos) return line.substr(at, line.find_last_not_of(" \n") + 1 - at);
  }
  return "";
}

}  // namespace

Action add_codegen(CLI::App& app) {
  auto* cmd = app.add_subcommand("codegen", "Show the Contraction, Schedule, CUDA source and SASS mix of one workload");
  struct Opts {
    std::string conv_file, gemm_file, name;
    bool no_tensor_cores = false, no_source = false;
    std::string arch, schedule;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--conv2d", o->conv_file, "conv2d workload CSV");
  cmd->add_option("--gemm", o->gemm_file, "GEMM workload CSV");
  cmd->add_option("--workload", o->name, "workload name in the file")->required();
  cmd->add_option("--arch", o->arch, "plan and compile for this GPU: sm_90a or sm_80 (default: the GPU present, else sm_90a)");
  cmd->add_flag("--no-tensor-cores", o->no_tensor_cores, "use the SIMT generator");
  cmd->add_option("--schedule", o->schedule,
                  "this schedule (a name as explain and tune print it) instead of the default");
  cmd->add_flag("--no-source", o->no_source, "do not print the generated source");
  return [cmd, o]() {
    if (!cmd->parsed()) return -1;
    TESSEL_USER_CHECK(o->conv_file.empty() != o->gemm_file.empty())
        << "codegen: give exactly one of --conv2d or --gemm";
    std::optional<ir::Graph> g;
    if (!o->conv_file.empty()) {
      for (const auto& w : bench::read_conv_workloads(o->conv_file))
        if (w.name == o->name) g = workload_graph(w);
    } else {
      for (const auto& w : bench::read_gemm_workloads(o->gemm_file))
        if (w.name == o->name) g = workload_graph(w);
    }
    TESSEL_USER_CHECK(g) << "codegen: no workload named '" << o->name << "'";
    const device::DeviceInfo device = planning_target(o->arch);
    const std::string arch = device.arch();
    compiler::Options options;
    options.tensor_cores = !o->no_tensor_cores;
    compiler::NodePlan plan = plan_workload(*g, options, device);
    if (!o->schedule.empty()) {
      TESSEL_USER_CHECK(plan.run == compiler::NodeRun::kContraction)
          << "codegen: --schedule applies to contractions; " << o->name << " is not one";
      const contraction::Contraction& c = *plan.match.contraction;
      const std::optional<kernels::Schedule> s = kernels::parse_schedule(o->schedule, c);
      TESSEL_USER_CHECK(s) << "codegen: " << o->schedule << ": not a schedule name for " << o->name;
      const std::optional<std::string> why = kernels::cuda::can_implement(c, plan.epilogue, *s);
      TESSEL_USER_CHECK(!why) << "codegen: " << o->schedule << ": " << why.value_or("");
      plan.schedule = *s;
    }
    std::printf("== node\n%s\n== plan: %s\n", g->nodes[0].label().c_str(), plan.summary().c_str());
    std::string name, source;
    std::vector<std::pair<std::string, std::string>> headers;
    if (plan.run == compiler::NodeRun::kUnsupported) return 1;
    if (plan.run == compiler::NodeRun::kContraction) {
      const contraction::Contraction& c = *plan.match.contraction;
      std::printf("== index maps\n%s\n", c.maps.str().c_str());
      std::printf("== contraction\n%s\n", c.str().c_str());
      std::printf("== tensor cores: %s\n", plan.tensor_cores() ? "yes" : "no");
      for (const contraction::Remark& r : plan.match.remarks)
        std::printf("   remark: %s\n", r.text.c_str());
      std::printf("== schedule %s (%d threads)\n", plan.schedule.name().c_str(),
                  plan.schedule.threads());
      kernels::cuda::KernelSource src = kernels::cuda::emit(c, plan.epilogue, plan.schedule);
      std::printf("== launch grid (%u,%u,%u) block (%u,%u,%u) smem %u B workspace %zu B\n",
                  src.grid[0], src.grid[1], src.grid[2], src.block[0], src.block[1], src.block[2],
                  src.smem_bytes, src.workspace_bytes);
      name = src.name, source = src.source, headers = src.headers;
    } else {
      kernels::cuda::OpKernelSource src = kernels::cuda::emit_op(*g, g->nodes[0]);
      std::printf("== launch grid (%u,%u,%u) block (%u,%u,%u) smem %u B\n", src.grid[0],
                  src.grid[1], src.grid[2], src.block[0], src.block[1], src.block[2],
                  src.smem_bytes);
      name = src.name, source = src.source, headers = src.headers;
    }
    if (!o->no_source) std::printf("== source (%s)\n%s\n", name.c_str(), source.c_str());
    device::CompileOptions copts;
    copts.arch = arch;
    copts.headers = headers;
    device::CompiledKernel k = device::compile(source, name, copts);
    std::printf("== compiled for %s: %zu bytes of cubin%s\n", arch.c_str(), k.cubin.size(),
                k.from_cache ? " (from cache)" : "");
    const std::string usage = resource_usage(k.cubin);
    if (!usage.empty()) std::printf("== resources: %s\n", usage.c_str());
    auto mix = sass_mix(k.cubin);
    if (mix.empty()) {
      // cuobjdump reads resource usage itself; its --dump-sass runs nvdisasm.
      std::printf("== SASS mix: %s\n", usage.empty() ? "cuobjdump not available"
                                                      : "none (cuobjdump --dump-sass needs nvdisasm on PATH)");
    } else {
      std::printf("== SASS mix:");
      for (const auto& [op, count] : mix) std::printf(" %s=%d", op.c_str(), count);
      std::printf("\n");
    }
    return 0;
  };
}

}  // namespace tessel::cli
