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

}  // namespace tally::bench
