// Progress on stderr for long runs: one rewritten line on a terminal, plain lines otherwise.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tally::cli {

class progress {
 public:
  explicit progress(std::string what) : what_(std::move(what)), tty_(isatty(STDERR_FILENO) != 0) {}
  ~progress() {
    if (tty_ && shown_) std::fputs("\n", stderr);
  }
  // Shown once the run has lasted a couple of seconds, then on every step.
  void step(const std::string& line) {
    ++steps_;
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    if (t < 2.0 && !shown_) return;
    shown_ = true;
    if (tty_) std::fprintf(stderr, "\r\033[K[%s %5.0fs, %d done] %s", what_.c_str(), t, steps_, line.c_str());
    else std::fprintf(stderr, "[%s %5.0fs, %d done] %s\n", what_.c_str(), t, steps_, line.c_str());
    std::fflush(stderr);
  }

 private:
  std::string what_;
  bool tty_;
  bool shown_ = false;
  int steps_ = 0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace tally::cli
