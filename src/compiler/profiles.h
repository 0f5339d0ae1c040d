// Dynamic batch: one engine for a range of batch sizes. Kernels are specialised for their shapes
// when they are generated (constants baked in), so a dynamic engine holds one plan per batch of
// a profile set (runtime/engine_plan.h PlanProfile), each the plan a static compile for that
// batch makes, sharing one constant image, one cubin list, one arena and one scratch buffer;
// runtime/batch_split.h runs the batches between profiles.
//
//   CompiledPlan c = compile_profiles(import_at, {1, 64, 32}, options, target);
//   // profiles 1, 2, 4, 8, 16, 32, 64
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "compiler/compile_plan.h"

namespace tessel::compiler {

// The batches a range compiles: its ends, its opt batch and every power of two between, so
// that any batch is at most twice a profile (padding at most doubles the work; batch_split
// splits where that is cheaper) and the common batches are exact; with `every` > 0 also each
// multiple of it between, so that padding adds fewer than `every` rows. Ascending.
std::vector<int64_t> profile_batches(const runtime::BatchRange& range, int64_t every = 0);

// Single-profile plans for one target and precision (compile_plan's, in ascending batch) as one
// engine: identical constants (by content: the weights of every profile) stored once, identical
// cubins once, workspaces renumbered, the arena and scratch buffer sized for the largest.
runtime::EnginePlan merge_profiles(std::vector<runtime::EnginePlan> plans, int64_t opt);

// A UserError unless every input and output of `g` (a model imported at `batch`) leads with
// `batch`: "batch range 1:64: input 'x' is f32[1,3,8,8] at batch 2; a batch range needs every
// input and output to lead with the batch (a symbolic first dimension)".
void check_leads_with_batch(const ir::Graph& g, int64_t batch, const runtime::BatchRange& range);

// Compiles the model at each batch of profile_batches(range, options.profile_every) (graph_at(b):
// the model imported with its symbolic batch set to b) and merges the plans. A model whose inputs and outputs do
// not all lead with the batch is a UserError naming the first that does not: a range needs a
// symbolic first dimension, and running a batch between profiles needs its items independent.
// The result's graph is the opt batch's.
CompiledPlan compile_profiles(const std::function<ir::Graph(int64_t batch)>& graph_at,
                              const runtime::BatchRange& range, const Options& options,
                              const device::DeviceInfo& target);

}  // namespace tessel::compiler
