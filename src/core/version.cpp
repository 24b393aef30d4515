// libtally's own version, compiled in: what tally::library_version() reports to a program that
// may have been compiled against other headers.
#include "tally/tally.hpp"

namespace tally {

version_info library_version() noexcept {
  return {TALLY_VERSION_MAJOR, TALLY_VERSION_MINOR, TALLY_VERSION_PATCH, TALLY_VERSION_STRING};
}

}  // namespace tally
