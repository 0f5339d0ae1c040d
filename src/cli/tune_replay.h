// `tessel tune MODEL --replay LOG`: the default picks of a model against measurements that
// `tessel tune --log` wrote earlier (on a GPU), without a GPU. For a change to the cost model or
// the default tables, the replay says what the new picks would measure, offline, wherever the
// log has timed them.
#pragma once

#include <string>

#include "cli/commands.h"

namespace tessel::cli {

struct ReplayOptions {
  std::string log;     // tune --log JSON lines (key, node, schedule, rank, microseconds, ...)
  std::string target;  // plan for this GPU ("" = the GPU present, else sm_90a)
  std::string json;    // also write the per-contraction rows and the totals here
  std::string relog;   // also write the log's lines of this model's keys, estimate_us re-estimated
};

// Prints, per unique contraction of the model (tuning key), its default schedule on the target
// and that schedule's fastest time in the log, the log's fastest schedule and time; then the
// totals over the model's contraction nodes whose defaults the log timed. With `relog`, also
// writes the log again with each line's estimate_us as this tessel's cost model estimates it
// (lines of keys the model lacks or schedules it cannot name are dropped, and counted), so that
// a change to the estimate can be refitted (bench/rank_fit.py) on the measurements already
// taken. 0 on success.
int replay_tune_log(const ModelOptions& model, const std::string& precision, const ReplayOptions& o);

}  // namespace tessel::cli
