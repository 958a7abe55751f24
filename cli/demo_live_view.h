// The live terminal view of `flotilla demo` (and of `flotilla up` in the foreground): nodes by
// GPU type and state; per job a progress bar (step / trainSteps), loss, measured tokens/s, the
// plan (stages, GPU types, layers), phase and the last decision with its reason; and the
// newest scaling events.
//
// Guarantees: on a terminal, each render() redraws one screen of at most 80 columns x 24 rows
//   (cursor home + clear, no curses); otherwise (a pipe, a file, --headless) it prints only the
//   event lines that are new since the last render, as plain lines, so a log stays readable.
// Assumes: one writer to stdout.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "cli/demo_observer.h"

namespace flotilla::cli {

class LiveView {
 public:
  // interactive: draw screens (stdout is a TTY and the caller wants it); else plain lines.
  LiveView(bool interactive, std::string title);
  void render(const DemoObserver& observer);
  // The screen as lines (at most 24, each at most 80 columns): what render() draws.
  static std::vector<std::string> screen(const DemoObserver& observer, const std::string& title);

 private:
  bool interactive_;
  std::string title_;
  std::size_t printed_events_ = 0;
};

}  // namespace flotilla::cli
