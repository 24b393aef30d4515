#include "bench/schedule.hpp"

#include "core/context.hpp"
#include "core/policy.hpp"
#include "tally/tally.hpp"

namespace tally::bench {

schedule parse_schedule(const std::string& name) {
  if (name == "policy") return schedule::policy;
  if (name == "strided") return schedule::strided;
  if (name == "dynamic") return schedule::dynamic;
  throw tally::error("--schedule " + name + ": give policy, strided or dynamic");
}

schedule_scope::schedule_scope(schedule s, report& rep) {
  core::force_dynamic(s == schedule::policy    ? core::kDynamicByPolicy
                      : s == schedule::strided ? core::kDynamicOff
                                               : core::kDynamicPastSizeRule);
  rep.meta["schedule"] = s == schedule::policy
                             ? "the GPU's policy"
                             : s == schedule::strided ? "forced: the strided grid at every size"
                                                      : "forced: the dynamic schedule past 8 x L2";
}

schedule_scope::~schedule_scope() { core::force_dynamic(core::kDynamicByPolicy); }

exact_chunks_scope::exact_chunks_scope(int rounds, int tail, report& rep) {
  core::force_exact_chunks(rounds, tail);
  if (core::forced_exact_chunks()) {  // the values that run: a side not forced is the policy's
    const core::device_policy& pol = core::policy_for(core::current_context());
    rep.meta["exact_chunks"] = "forced: at least " + std::to_string(core::exact_chunk_rounds(pol)) +
                               " rounds a chunk, the last rounds >> " + std::to_string(core::exact_chunk_tail(pol)) +
                               " in one-round chunks (>> 0: none)";
  }
}

exact_chunks_scope::~exact_chunks_scope() { core::force_exact_chunks(-1, -1); }

depth_scope::depth_scope(const std::string& depth, report& rep) {
  if (depth != "policy" && depth != "base" && depth != "deep")
    throw tally::error("--depth " + depth + ": give policy, base or deep");
  core::force_depth(depth == "base" ? 0 : depth == "deep" ? 1 : -1);
  if (depth != "policy") rep.meta["depth"] = "forced: every launch in the " + depth + " shape";
}

depth_scope::~depth_scope() { core::force_depth(-1); }

}  // namespace tally::bench
