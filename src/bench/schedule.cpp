#include "bench/schedule.hpp"

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
  if (rounds >= 0 || tail >= 0)
    rep.meta["exact_chunks"] = "forced: at least " + std::to_string(std::max(rounds, 1)) +
                               " rounds a chunk, tail shift " + std::to_string(tail) + " (-1: the policy's)";
}

exact_chunks_scope::~exact_chunks_scope() { core::force_exact_chunks(-1, -1); }

}  // namespace tally::bench
