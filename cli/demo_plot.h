// `flotilla demo`'s picture: one PNG (gnuplot, Debian's gnuplot-nox) with three panels over the
// elastic job's run: its loss against the uninterrupted reference run (by step), its GPU count
// and plan epoch over time, and its measured against predicted tokens/s over time.
//
// Guarantees: writes the data files and the gnuplot script beside the PNG (so the picture can be
//   re-made by hand) and returns "" when gnuplot wrote the PNG, else one line saying why (gnuplot
//   missing: how to install it). Never throws.
#pragma once

#include <string>

#include "cli/demo_observer.h"

namespace flotilla::cli {

std::string write_demo_picture(const DemoObserver& observer, const std::string& elastic_loss_log,
                               const std::string& reference_loss_log, const std::string& png_path);

}  // namespace flotilla::cli
