// cuBLAS for the benchmarks (dot against cublasSdot/cublasDdot), loaded on first use with dlopen
// instead of linked: cuBLAS and cuBLASLt are about 600 MB of shared objects, and merely linking
// them made every start of the tally command take 0.12-0.16 s and 215 MB of memory more (a
// program that only links libcudart against one that also links libcublas, measured on the CPU
// build machine 2026-11-25) -- commands such as `tally reduce FILE` never call cuBLAS, and that
// start-up counted against their end-to-end rate.
#pragma once

#ifndef TALLY_HAVE_CUBLAS
#define TALLY_HAVE_CUBLAS 0  // CMake defines it to 1 when it finds cuBLAS's headers (CUDA::cublas)
#endif

#if TALLY_HAVE_CUBLAS
#include <cublas_v2.h>

#include <string>

namespace tally::bench::cublas {

// The cuBLAS functions the benchmarks call (the _v2 entry points, as cublas_v2.h names them).
struct functions {
  decltype(&::cublasCreate) create;
  decltype(&::cublasDestroy) destroy;
  decltype(&::cublasSetStream) set_stream;
  decltype(&::cublasSetWorkspace) set_workspace;
  decltype(&::cublasSetPointerMode) set_pointer_mode;
  decltype(&::cublasSdot_64) sdot;
  decltype(&::cublasDdot_64) ddot;
  decltype(&::cublasGetProperty) get_property;
  decltype(&::cublasGetStatusString) status_string;
};

// The shared object's name: libcublas.so.<the major version of the headers built against>.
std::string library_name();
// Loads cuBLAS on the first call (from the directory of the CUDA runtime this process uses, else
// by the dynamic loader's search) and returns its functions; throws tally::error naming the
// library or the function that could not be found. Later calls return the same table.
const functions& api();
// Whether api() succeeds; if not and `why` is given, why not.
bool available(std::string* why = nullptr) noexcept;

}  // namespace tally::bench::cublas
#endif
