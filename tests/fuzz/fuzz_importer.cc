// libFuzzer target for the ONNX importer: any byte string given to import_model_bytes must
// either import or raise a tessel::Error. Anything else (a crash, a sanitizer report, another
// exception type, a hang, an allocation beyond -rss_limit_mb) is a bug.
//
// External data is refused (no base folder), so the fuzzer never reads files.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "frontend/onnx/importer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    tessel::onnx::import_model_bytes(bytes, "fuzz.onnx", /*base_dir=*/"");
  } catch (const tessel::Error&) {
    // The importer's contract for bad input.
  }
  return 0;
}
