#include "compiler/tuning_db.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/hash.h"

namespace tessel::compiler {
namespace {

constexpr char kFormat[] = "tessel-tuning-db";

std::string checksum_of(const nlohmann::json& records) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, fnv1a64(records.dump()));
  return hex;
}

}  // namespace

std::string tuning_key(const contraction::Contraction& c, const contraction::Epilogue& e) {
  return c.key() + "|" + contraction::cost_str(e);
}

std::string TuningDb::device_key(const device::DeviceInfo& device) {
  return device.arch() + "/" + std::to_string(device.sm_count) + "/" + device.name;
}

TuningDb TuningDb::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  TESSEL_USER_CHECK(f.good()) << path << ": cannot open file";
  std::stringstream text;
  text << f.rdbuf();
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception&) {
    TESSEL_USER_ERROR() << path << ": not a tessel tuning database (not JSON)";
  }
  TESSEL_USER_CHECK(j.is_object() && j.value("format", "") == kFormat)
      << path << ": not a tessel tuning database (format is not \"" << kFormat << "\")";
  TESSEL_USER_CHECK(j.contains("version") && j["version"].is_number_integer() &&
                    j["version"].get<int>() == kVersion)
      << path << ": tuning database version "
      << (j.contains("version") ? j["version"].dump() : "missing") << "; this tessel reads version "
      << kVersion
      << (j.contains("version") && j["version"] == 1
              ? " (version 1 keys do not name the epilogue: run tessel tune again)"
              : "");
  TESSEL_USER_CHECK(j.contains("records") && j["records"].is_array())
      << path << ": tuning database without a records list";
  TESSEL_USER_CHECK(j.contains("checksum") && j["checksum"].is_string() &&
                    j["checksum"].get<std::string>() == checksum_of(j["records"]))
      << path << ": damaged tuning database (its checksum does not match its records)";
  TuningDb db;
  size_t i = 0;
  for (const nlohmann::json& r : j["records"]) {
    const bool ok = r.is_object() && r.contains("key") && r["key"].is_string() &&
                    r.contains("device") && r["device"].is_string() && r.contains("schedule") &&
                    r["schedule"].is_string() && r.contains("microseconds") &&
                    r["microseconds"].is_number() && r["microseconds"].get<double>() > 0 &&
                    r.contains("candidates") && r["candidates"].is_number_integer();
    TESSEL_USER_CHECK(ok) << path << ": tuning record " << i
                          << " is malformed (key, device, schedule, microseconds > 0, candidates)";
    db.add({r["key"].get<std::string>(), r["device"].get<std::string>(),
            r["schedule"].get<std::string>(), r["microseconds"].get<double>(),
            r["candidates"].get<int>()});
    ++i;
  }
  return db;
}

TuningDb TuningDb::load_or_empty(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec) ? load(path) : TuningDb{};
}

void TuningDb::save(const std::string& path) const {
  nlohmann::json records = nlohmann::json::array();
  for (const auto& [id, r] : records_)
    records.push_back({{"key", r.key},
                       {"device", r.device},
                       {"schedule", r.schedule},
                       {"microseconds", r.microseconds},
                       {"candidates", r.candidates}});
  const nlohmann::json j = {{"format", kFormat},
                            {"version", kVersion},
                            {"records", records},
                            {"checksum", checksum_of(records)}};
  // Written beside and renamed, so that a reader never sees half a file.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    TESSEL_USER_CHECK(f.good()) << path << ": cannot open for writing";
    f << j.dump(1) << "\n";
    TESSEL_USER_CHECK(f.good()) << path << ": write failed";
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  TESSEL_USER_CHECK(!ec) << path << ": cannot write (" << ec.message() << ")";
}

const TuningRecord* TuningDb::find(const std::string& key, const std::string& device) const {
  const auto it = records_.find({device, key});
  return it == records_.end() ? nullptr : &it->second;
}

void TuningDb::add(const TuningRecord& r) {
  auto [it, fresh] = records_.try_emplace({r.device, r.key}, r);
  if (fresh) return;
  const int candidates = std::max(it->second.candidates, r.candidates);
  if (r.microseconds < it->second.microseconds) it->second = r;
  it->second.candidates = candidates;
}

void TuningDb::merge(const TuningDb& other) {
  for (const auto& [id, r] : other.records_) add(r);
}

std::vector<TuningRecord> TuningDb::records() const {
  std::vector<TuningRecord> out;
  for (const auto& [id, r] : records_) out.push_back(r);
  return out;
}

}  // namespace tessel::compiler
