// The benchmarks' cuBLAS is loaded on first use, not linked (src/bench/cublas_loader.hpp): the
// tally command and the test programs start without mapping it, and the first use finds it and
// every function the benchmarks call. No GPU needed (cublasGetProperty reads the library's
// version only).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "bench/cublas_loader.hpp"

namespace {

bool mapped(const char* library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find(library) != std::string::npos) return true;
  return false;
}

}  // namespace

#if TALLY_HAVE_CUBLAS
TEST(BenchCpu, CublasIsLoadedOnFirstUseWithEveryFunction) {
  namespace cb = tally::bench::cublas;
  // ctest runs each test in a process of its own: nothing has asked for cuBLAS yet.
  EXPECT_FALSE(mapped("libcublas")) << "cuBLAS was mapped before any benchmark asked for it";
  // Built with cuBLAS's headers, the library is beside them on every machine this project builds
  // and tests on (the build machine, CI, the GPU machines): not finding it is a loader defect.
  std::string why;
  ASSERT_TRUE(cb::available(&why)) << why;
  EXPECT_TRUE(mapped(cb::library_name().c_str()));
  const cb::functions& f = cb::api();
  EXPECT_NE(f.create, nullptr);
  EXPECT_NE(f.destroy, nullptr);
  EXPECT_NE(f.set_stream, nullptr);
  EXPECT_NE(f.set_workspace, nullptr);
  EXPECT_NE(f.set_pointer_mode, nullptr);
  EXPECT_NE(f.sdot, nullptr);
  EXPECT_NE(f.ddot, nullptr);
  EXPECT_NE(f.status_string, nullptr);
  int major = -1;
  ASSERT_EQ(f.get_property(MAJOR_VERSION, &major), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(major, CUBLAS_VER_MAJOR);  // the library loaded is the one the headers describe
  // The error text tally's messages quote: a distinct text per status.
  ASSERT_NE(f.status_string(CUBLAS_STATUS_SUCCESS), nullptr);
  EXPECT_STRNE(f.status_string(CUBLAS_STATUS_NOT_INITIALIZED), f.status_string(CUBLAS_STATUS_SUCCESS));
}
#endif
