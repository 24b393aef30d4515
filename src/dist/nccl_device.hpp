// NCCL's device API (nccl_device.h, NCCL 2.28 and later) where this build has it:
// TALLY_DIST_DEVICE_API is 1 then, and lsa_requirements() gives a device communicator's
// requirements of `barriers` LSA barriers (NCCL's initializer where the headers define one).
// Included by CUDA sources only (src/dist/device_exchange.cu).
#pragma once

#include <nccl.h>

#include <cstring>

#if defined(__has_include)
#if __has_include(<nccl_device.h>) && NCCL_VERSION_CODE >= 22800 && !defined(TALLY_NO_NCCL_DEVICE_API)
#define TALLY_DIST_DEVICE_API 1
#include <nccl_device.h>
#endif
#endif

#ifdef TALLY_DIST_DEVICE_API
namespace tally::dist {
inline ncclDevCommRequirements lsa_requirements(int barriers) {
#ifdef NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER
  ncclDevCommRequirements reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
#else
  ncclDevCommRequirements reqs;
  std::memset(&reqs, 0, sizeof reqs);
#endif
  reqs.lsaBarrierCount = barriers;
  return reqs;
}
}  // namespace tally::dist
#endif
