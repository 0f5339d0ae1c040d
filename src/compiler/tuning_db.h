// The tuning database: for a contraction node (tuning_key: the contraction's key, the text
// that determines its generated mainloop, and what of its epilogue changes its time) on a GPU,
// the fastest schedule `tessel tune` measured. `compile` uses an
// entry where one matches (plan_node; `explain` says "tuned"), the cost model's pick
// elsewhere. A JSON file, portable between machines (keys name no path or address), and
// mergeable: per (key, device) the faster record wins, and the record keeps the larger
// `candidates`, how far down the contraction's ranked candidates any tuner has measured (a
// later `tessel tune` goes on from there).
//
//   {"format": "tessel-tuning-db", "version": 2,
//    "records": [{"key": "...", "device": "sm_90a/132/NVIDIA H100 80GB HBM3",
//                 "schedule": "tc_128x128x32_s3_w64x64_sk1_r8", "microseconds": 41.2,
//                 "candidates": 12}, ...],
//    "checksum": "<FNV-1a 64 of the records' JSON text, hex>"}
//
// Loading trusts nothing: a file that is not JSON, of another format or version, with a
// checksum that does not match its records (edited or truncated) or a malformed record is a
// UserError naming the file and what is wrong.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "device/device_info.h"
#include "kernels/contraction/contraction.h"
#include "kernels/contraction/epilogue.h"

namespace tessel::compiler {

// A record's key: Contraction::key() and, after "|", what of the epilogue changes the kernel's
// time (contraction::cost_str: an A prologue, the bytes read per output, the store's kind, the
// output dtype). A ResNet block's projection shortcut and its residual conv compute one
// contraction, and the residual's reads give the second 1.5x the time (57 vs 38 us, H100,
// 2026-11-28): each has its own record.
std::string tuning_key(const contraction::Contraction& c, const contraction::Epilogue& e);

struct TuningRecord {
  std::string key;       // tuning_key()
  std::string device;    // TuningDb::device_key
  std::string schedule;  // kernels::Schedule::name()
  double microseconds = 0;  // measured median per launch
  // How many of the contraction's candidates, in `tessel tune`'s order (the default, then the
  // schedule space ranked by the cost model), have been measured or refused.
  int candidates = 0;
  bool operator==(const TuningRecord&) const = default;
};

class TuningDb {
 public:
  // 2: keys name the epilogue (tuning_key); version 1 keys were the contraction's alone.
  static constexpr int kVersion = 2;

  // Reads `path`; UserError when it is missing or not a valid database.
  static TuningDb load(const std::string& path);
  // `path`'s records when the file exists, else an empty database.
  static TuningDb load_or_empty(const std::string& path);
  // Writes the database (records sorted by device then key, so that equal databases are
  // equal files); UserError when the file cannot be written.
  void save(const std::string& path) const;

  // The GPU part of a record's identity: architecture, SM count and name ("sm_90a/132/NVIDIA
  // H100 80GB HBM3"): an H100 PCIe (114 SMs) keeps records of its own.
  static std::string device_key(const device::DeviceInfo& device);

  const TuningRecord* find(const std::string& key, const std::string& device) const;
  // Keeps r where no record of its (key, device) exists or r is faster.
  // Per (device, key): the faster record's schedule and time, the larger `candidates`.
  void add(const TuningRecord& r);
  void merge(const TuningDb& other);
  size_t size() const { return records_.size(); }
  std::vector<TuningRecord> records() const;

 private:
  std::map<std::pair<std::string, std::string>, TuningRecord> records_;  // (device, key)
};

}  // namespace tessel::compiler
