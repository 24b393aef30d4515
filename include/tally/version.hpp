// tally's version, written here and nowhere else: CMakeLists.txt's project() and the Python
// package's metadata (pyproject.toml) read it from this file.
//
//   #if TALLY_VERSION >= 100            // 0.1.0 or later
//   std::puts(TALLY_VERSION_STRING);    // "0.1.0": the headers compiled against
//   tally::library_version().text       // the libtally the program runs with (tally.hpp)
#pragma once

#define TALLY_VERSION_MAJOR 0
#define TALLY_VERSION_MINOR 1
#define TALLY_VERSION_PATCH 0

#define TALLY_VERSION_STR_(x) #x
#define TALLY_VERSION_STR(x) TALLY_VERSION_STR_(x)
// "MAJOR.MINOR.PATCH", and one number that orders versions: MAJOR * 10000 + MINOR * 100 + PATCH.
#define TALLY_VERSION_STRING                                                  \
  TALLY_VERSION_STR(TALLY_VERSION_MAJOR)                                      \
  "." TALLY_VERSION_STR(TALLY_VERSION_MINOR) "." TALLY_VERSION_STR(TALLY_VERSION_PATCH)
#define TALLY_VERSION (TALLY_VERSION_MAJOR * 10000 + TALLY_VERSION_MINOR * 100 + TALLY_VERSION_PATCH)
