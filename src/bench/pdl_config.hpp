// The launch configuration of a launch with programmatic dependent launch allowed (or not), as
// tally's launcher makes every launch (core/launch.cuh, launch_pdl): for the benchmarks' own
// launches (bench/tune.cu) and the standalone probes (src/bench/probes), which launch kernels on
// the library's terms. Not copyable: cfg.attrs points into the object.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace tally::bench {

struct pdl_config {
  cudaLaunchAttribute attr[1]{};
  cudaLaunchConfig_t cfg{};
  pdl_config(unsigned blocks, int block, cudaStream_t s, bool pdl = true, std::size_t smem = 0) {
    cfg.gridDim = dim3(blocks);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = s;
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
  }
  pdl_config(const pdl_config&) = delete;
  pdl_config& operator=(const pdl_config&) = delete;
};

}  // namespace tally::bench
