// The persistent kernel cache: hits, misses, and damaged entries. No GPU needed.
#include "device/kernel_cache.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "device/cuda_api.h"

namespace tessel::device {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSource = R"(
extern "C" __global__ void add_one(float* x) { x[threadIdx.x] += 1.0f; }
)";

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

class KernelCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("tessel_cache_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    set_cache_dir(dir_.string());
    options_.arch = "sm_80";
  }
  void TearDown() override {
    set_cache_dir("");
    fs::remove_all(dir_);
  }
  // The one entry file in the cache (each test compiles one kernel before damaging it).
  fs::path only_entry() const {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir_ / "kernels")) files.push_back(e.path());
    EXPECT_EQ(files.size(), 1u);
    return files.empty() ? fs::path() : files[0];
  }

  fs::path dir_;
  CompileOptions options_;
};

TEST_F(KernelCache, SecondCompileIsAHit) {
  CompiledKernel first = compile(kSource, "add_one", options_);
  EXPECT_FALSE(first.from_cache);
  const fs::path entry = only_entry();
  EXPECT_EQ(entry.extension(), ".cubin");
  EXPECT_EQ(entry.stem().string().size(), 16u);  // the key in hex

  CompiledKernel second = compile(kSource, "add_one", options_);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.cubin, first.cubin);
  EXPECT_EQ(second.log, first.log);
}

TEST_F(KernelCache, EveryPartOfTheKeyMatters) {
  compile(kSource, "add_one", options_);
  CompileOptions other_arch = options_;
  other_arch.arch = "sm_90a";
  EXPECT_FALSE(compile(kSource, "add_one", other_arch).from_cache);
  CompileOptions other_options = options_;
  other_options.extra = {"-lineinfo"};
  EXPECT_FALSE(compile(kSource, "add_one", other_options).from_cache);
  CompileOptions with_header = options_;
  with_header.headers = {{"unused.cuh", "// v1\n"}};
  EXPECT_FALSE(compile(kSource, "add_one", with_header).from_cache);
  with_header.headers = {{"unused.cuh", "// v2\n"}};
  EXPECT_FALSE(compile(kSource, "add_one", with_header).from_cache);
  EXPECT_FALSE(compile(std::string(kSource) + "\n", "add_one", options_).from_cache);
  // ... and the first one is still there.
  EXPECT_TRUE(compile(kSource, "add_one", options_).from_cache);
}

// A damaged entry must be rebuilt, and the rebuilt entry must be good again.
void expect_rebuilt(const CompileOptions& o, const std::string& good_cubin) {
  CompiledKernel rebuilt = compile(kSource, "add_one", o);
  EXPECT_FALSE(rebuilt.from_cache);
  EXPECT_EQ(rebuilt.cubin, good_cubin);
  CompiledKernel again = compile(kSource, "add_one", o);
  EXPECT_TRUE(again.from_cache);
  EXPECT_EQ(again.cubin, good_cubin);
}

TEST_F(KernelCache, TruncatedEntryIsRebuilt) {
  const std::string cubin = compile(kSource, "add_one", options_).cubin;
  const fs::path entry = only_entry();
  const std::string bytes = read_file(entry);
  // Cut inside the payload, as a crash mid-write would (were writes not atomic), and at the
  // header, and to nothing.
  for (size_t keep : {bytes.size() - 1, size_t{20}, size_t{0}}) {
    write_file(entry, bytes.substr(0, keep));
    expect_rebuilt(options_, cubin);
  }
}

TEST_F(KernelCache, FlippedByteIsDetected) {
  const std::string cubin = compile(kSource, "add_one", options_).cubin;
  const fs::path entry = only_entry();
  const std::string bytes = read_file(entry);
  // One byte in the cubin, one in the checksum, one in the magic, one in the version.
  for (size_t at : {bytes.size() / 2, size_t{33}, size_t{0}, size_t{8}}) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x10);
    write_file(entry, damaged);
    expect_rebuilt(options_, cubin);
  }
}

TEST_F(KernelCache, EntryUnderAnotherKeyIsRejected) {
  detail::cache_store(dir_.string(), 1, {"cubin bytes", "log"});
  std::optional<detail::CacheEntry> hit = detail::cache_load(dir_.string(), 1);
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->cubin, "cubin bytes");
  EXPECT_EQ(hit->log, "log");
  // Copied to another key's file name: the key inside the header no longer matches.
  fs::copy_file(detail::cache_entry_path(dir_.string(), 1),
                detail::cache_entry_path(dir_.string(), 2));
  EXPECT_FALSE(detail::cache_load(dir_.string(), 2));
  EXPECT_FALSE(fs::exists(detail::cache_entry_path(dir_.string(), 2))) << "deleted";
}

TEST_F(KernelCache, NoTemporaryFilesAreLeft) {
  compile(kSource, "add_one", options_);
  options_.arch = "sm_90a";
  compile(kSource, "add_one", options_);
  for (const auto& e : fs::directory_iterator(dir_ / "kernels"))
    EXPECT_EQ(e.path().extension(), ".cubin") << e.path();
}

TEST_F(KernelCache, EmptyDirectoryDisablesTheCache) {
  set_cache_dir("");
  EXPECT_EQ(cache_dir(), "");
  EXPECT_FALSE(compile(kSource, "add_one", options_).from_cache);
  EXPECT_FALSE(compile(kSource, "add_one", options_).from_cache);
  EXPECT_FALSE(fs::exists(dir_));
}

TEST_F(KernelCache, UnwritableDirectoryIsAUserError) {
  // A regular file where the cache directory should be.
  fs::create_directories(dir_);
  write_file(dir_ / "kernels", "not a directory");
  try {
    compile(kSource, "add_one", options_);
    FAIL() << "compiled into an unwritable cache";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("TESSEL_CACHE_DIR"), std::string::npos) << e.what();
  }
}

TEST(KernelCacheDir, EnvironmentPrecedence) {
  using detail::default_cache_dir;
  EXPECT_EQ(default_cache_dir("/t", "/xdg", "/home/u"), "/t");
  EXPECT_EQ(default_cache_dir("", "/xdg", "/home/u"), "") << "set but empty disables";
  EXPECT_EQ(default_cache_dir(nullptr, "/xdg", "/home/u"), "/xdg/tessel");
  EXPECT_EQ(default_cache_dir(nullptr, "", "/home/u"), "/home/u/.cache/tessel");
  EXPECT_EQ(default_cache_dir(nullptr, nullptr, "/home/u"), "/home/u/.cache/tessel");
  EXPECT_EQ(default_cache_dir(nullptr, nullptr, nullptr), "");
}

}  // namespace
}  // namespace tessel::device
