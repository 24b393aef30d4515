#include "bench/cublas_loader.hpp"

#if TALLY_HAVE_CUBLAS
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "tally/tally.hpp"

#define TALLY_CUBLAS_NAME_(f) #f
#define TALLY_CUBLAS_NAME(f) TALLY_CUBLAS_NAME_(f)  // the exported name after cublas_v2.h's macros

namespace tally::bench::cublas {
namespace {

struct loaded {
  functions f{};
  std::string error;  // empty: loaded
};

// dlopen of the library beside the CUDA runtime (the toolkit tally was built with), then by name.
void* open_library(std::string& tried) {
  const std::string name = library_name();
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) != 0 && info.dli_fname != nullptr) {
    const std::string runtime = info.dli_fname;
    const std::size_t slash = runtime.rfind('/');
    if (slash != std::string::npos) {
      const std::string path = runtime.substr(0, slash + 1) + name;
      if (void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
      tried += path + ": " + dlerror() + "; ";
    }
  }
  if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
  tried += name + ": " + dlerror();
  return nullptr;
}

template <class F>
bool resolve(void* lib, F& slot, const char* symbol, std::string& error) {
  dlerror();
  void* p = dlsym(lib, symbol);
  if (p == nullptr) {
    error = library_name() + " has no " + symbol;
    return false;
  }
  slot = reinterpret_cast<F>(p);
  return true;
}

const loaded& state() {
  // Loaded once for the process and never unloaded (handles made from it may outlive any scope).
  static const loaded s = [] {
    loaded l;
    std::string tried;
    void* lib = open_library(tried);
    if (lib == nullptr) {
      l.error = "cuBLAS could not be loaded (" + tried + ")";
      return l;
    }
    functions& f = l.f;
    const bool ok = resolve(lib, f.create, TALLY_CUBLAS_NAME(cublasCreate), l.error) &&
                    resolve(lib, f.destroy, TALLY_CUBLAS_NAME(cublasDestroy), l.error) &&
                    resolve(lib, f.set_stream, TALLY_CUBLAS_NAME(cublasSetStream), l.error) &&
                    resolve(lib, f.set_workspace, TALLY_CUBLAS_NAME(cublasSetWorkspace), l.error) &&
                    resolve(lib, f.set_pointer_mode, TALLY_CUBLAS_NAME(cublasSetPointerMode), l.error) &&
                    resolve(lib, f.sdot, TALLY_CUBLAS_NAME(cublasSdot_64), l.error) &&
                    resolve(lib, f.ddot, TALLY_CUBLAS_NAME(cublasDdot_64), l.error) &&
                    resolve(lib, f.get_property, TALLY_CUBLAS_NAME(cublasGetProperty), l.error) &&
                    resolve(lib, f.status_string, TALLY_CUBLAS_NAME(cublasGetStatusString), l.error);
    if (!ok) l.f = functions{};
    return l;
  }();
  return s;
}

}  // namespace

std::string library_name() { return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR); }

const functions& api() {
  const loaded& s = state();
  if (!s.error.empty()) throw tally::error("tally bench: " + s.error);
  return s.f;
}

bool available(std::string* why) noexcept {
  const loaded& s = state();
  if (!s.error.empty() && why != nullptr) *why = s.error;
  return s.error.empty();
}

}  // namespace tally::bench::cublas
#endif
