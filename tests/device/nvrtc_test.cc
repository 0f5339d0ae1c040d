// NVRTC compilation: runs without a GPU (the cache is off here; kernel_cache_test covers it).
#include <gtest/gtest.h>

#include <cstring>
#include <regex>
#include <string>

#include "device/cuda_api.h"

namespace tessel::device {
namespace {

// ELF identification of a cubin: 64-bit, little endian, machine EM_CUDA (190).
void expect_cuda_elf(const std::string& cubin) {
  ASSERT_GT(cubin.size(), 64u);
  EXPECT_EQ(cubin.substr(0, 4), "\177ELF");
  EXPECT_EQ(cubin[4], 2) << "ELFCLASS64";
  EXPECT_EQ(cubin[5], 1) << "little endian";
  uint16_t machine = 0;
  std::memcpy(&machine, cubin.data() + 18, 2);
  EXPECT_EQ(machine, 190) << "EM_CUDA";
}

class Nvrtc : public ::testing::Test {
 protected:
  void SetUp() override { set_cache_dir(""); }
};

constexpr const char* kScale = R"(
extern "C" __global__ void scale(float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

TEST_F(Nvrtc, CompilesForSm80AndSm90a) {
  CompileOptions o;
  o.arch = "sm_80";
  CompiledKernel k80 = compile(kScale, "scale", o);
  expect_cuda_elf(k80.cubin);
  EXPECT_FALSE(k80.from_cache);
  // The symbol table names the entry point.
  EXPECT_NE(k80.cubin.find("scale"), std::string::npos);

  o.arch = "sm_90a";
  CompiledKernel k90 = compile(kScale, "scale", o);
  expect_cuda_elf(k90.cubin);
  EXPECT_NE(k80.cubin, k90.cubin);
}

// wgmma exists only in the arch-specific target: sm_90a must accept it and plain sm_90 must
// not, which proves the 'a' reaches ptxas.
TEST_F(Nvrtc, Sm90aEnablesWgmma) {
  const std::string src = R"(
extern "C" __global__ void fence() { asm volatile("wgmma.fence.sync.aligned;"); }
)";
  CompileOptions o;
  o.arch = "sm_90a";
  expect_cuda_elf(compile(src, "fence", o).cubin);
  o.arch = "sm_90";
  try {
    compile(src, "fence", o);
    FAIL() << "wgmma compiled for sm_90";
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("not supported on .target 'sm_90'"), std::string::npos) << msg;
    // ptxas errors are located in the PTX, which the report quotes with the line marked.
    EXPECT_TRUE(
        std::regex_search(msg, std::regex(R"(\n> +\d+ \| \s*wgmma\.fence\.sync\.aligned;)")))
        << msg;
  }
}

TEST_F(Nvrtc, CompileErrorCarriesLogAndSourceLines) {
  const std::string src =
      "extern \"C\" __global__ void broken(float* x) {\n"  // line 1
      "  int i = threadIdx.x;\n"                           // line 2
      "  x[i] = no_such_value;\n"                          // line 3
      "}\n";
  CompileOptions o;
  o.arch = "sm_80";
  try {
    compile(src, "broken", o);
    FAIL() << "compiled";
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    // NVRTC's own log ...
    EXPECT_NE(msg.find("broken(3): error: identifier \"no_such_value\" is undefined"),
              std::string::npos)
        << msg;
    // ... the options used ...
    EXPECT_NE(msg.find("--gpu-architecture=sm_80"), std::string::npos) << msg;
    // ... and the numbered source around the offending line, which is marked.
    EXPECT_NE(msg.find(">     3 |   x[i] = no_such_value;"), std::string::npos) << msg;
    EXPECT_NE(msg.find("      2 |   int i = threadIdx.x;"), std::string::npos) << msg;
  }
}

TEST_F(Nvrtc, HeadersAreIncludedByName) {
  const std::string src =
      "#include \"twice.cuh\"\n"
      "extern \"C\" __global__ void k(float* x) { x[0] = twice(x[0]); }\n";
  CompileOptions o;
  o.arch = "sm_80";
  o.headers = {{"twice.cuh", "inline float twice(float v) { return 2 * v; }\n"}};
  expect_cuda_elf(compile(src, "k", o).cubin);

  // An error inside a header is shown with the header's lines.
  o.headers = {{"twice.cuh", "// helper\ninline float twice(float v) { return 2 * w; }\n"}};
  try {
    compile(src, "k", o);
    FAIL() << "compiled";
  } catch (const InternalError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("first error at twice.cuh:2"), std::string::npos) << msg;
    EXPECT_NE(msg.find(">     2 | inline float twice(float v) { return 2 * w; }"),
              std::string::npos)
        << msg;
  }

  o.headers.clear();
  EXPECT_THROW(compile(src, "k", o), InternalError);  // could not open "twice.cuh"
}

TEST_F(Nvrtc, LogIsKeptOnSuccess) {
  const std::string src =
      "extern \"C\" __global__ void k(float* x) { int unused = 3; x[0] = 1.0f; }\n";
  CompileOptions o;
  o.arch = "sm_80";
  CompiledKernel k = compile(src, "k", o);
  EXPECT_NE(k.log.find("\"unused\" was declared but never referenced"), std::string::npos) << k.log;
}

TEST_F(Nvrtc, ExtraOptionsAreApplied) {
  // -D reaches the preprocessor: without it the #error fires.
  const std::string src =
      "#ifndef TILE\n#error TILE must be defined\n#endif\n"
      "extern \"C\" __global__ void k(float* x) { x[0] = TILE; }\n";
  CompileOptions o;
  o.arch = "sm_80";
  EXPECT_THROW(compile(src, "k", o), InternalError);
  o.extra = {"-DTILE=4"};
  expect_cuda_elf(compile(src, "k", o).cubin);
  o.extra = {"--no-such-option"};
  try {
    compile(src, "k", o);
    FAIL() << "accepted an invalid option";
  } catch (const InternalError& e) {
    EXPECT_NE(std::string(e.what()).find("NVRTC_ERROR_INVALID_OPTION"), std::string::npos)
        << e.what();
  }
}

TEST_F(Nvrtc, UnsupportedArchIsAUserError) {
  CompileOptions o;
  for (const char* arch : {"sm_42", "compute_90", "90", "sm_90b", "sm_99999999999"}) {
    o.arch = arch;
    try {
      compile(kScale, "scale", o);
      FAIL() << arch << " accepted";
    } catch (const UserError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string("unsupported GPU architecture '") + arch + "'"),
                std::string::npos)
          << msg;
      EXPECT_NE(msg.find("sm_90"), std::string::npos) << "lists what is supported: " << msg;
    }
  }
}

TEST(NvrtcVersion, IsMajorTimesThousandPlusMinorTimesTen) {
  const int v = nvrtc_version();
  EXPECT_GE(v, 12000);  // tessel builds against CUDA 12 or newer
  EXPECT_EQ(v % 10, 0);
}

}  // namespace
}  // namespace tessel::device
