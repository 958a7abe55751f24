#include "cli/demo_plot.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "process/spawn.h"

namespace flotilla::cli {
namespace {

namespace fs = std::filesystem;

// loss.log lines are "step hexfloat decimal"; the data file keeps "step decimal".
void write_loss(const std::string& log, const fs::path& out) {
  std::istringstream in(log);
  std::ofstream o(out);
  std::string step, hex, decimal;
  while (in >> step >> hex >> decimal) o << step << ' ' << decimal << '\n';
}

}  // namespace

std::string write_demo_picture(const DemoObserver& observer, const std::string& elastic_loss_log,
                               const std::string& reference_loss_log, const std::string& png_path) {
  const fs::path png = fs::absolute(png_path);
  const fs::path dir = png.parent_path() / (png.stem().string() + "-data");
  std::error_code ec;
  fs::create_directories(dir, ec);
  write_loss(elastic_loss_log, dir / "loss-elastic.dat");
  write_loss(reference_loss_log, dir / "loss-reference.dat");
  {
    std::ofstream o(dir / "elastic.dat");
    o << "# t_s gpus epoch measured_tokens_per_s predicted_tokens_per_s step\n";
    for (const JobSample& s : observer.samples())
      if (s.job == "elastic" && s.epoch > 0)
        o << s.t_s << ' ' << s.gpus << ' ' << s.epoch << ' ' << (s.phase == "Running" ? s.tokens_per_s : 0.0) << ' '
          << s.predicted_tokens_per_s << ' ' << s.step << '\n';
  }
  int rescales = 0;
  for (const PlanRecord& p : observer.plans()) rescales += p.job == "elastic";
  const fs::path script = dir / "demo.gnuplot";
  {
    std::ofstream g(script);
    g << "set terminal pngcairo size 1000,900 font 'sans,10'\n"
      << "set output '" << png.string() << "'\n"
      << "set multiplot layout 3,1 title 'flotilla demo: the elastic job on emulated heterogeneous GPUs'\n"
      << "set grid\nset key top right\n"
      << "set title 'loss: elastic job (" << rescales << " plans) vs uninterrupted reference run'\n"
      << "set xlabel 'step'\nset ylabel 'loss (log scale)'\nset logscale y\n"
      << "plot '" << (dir / "loss-reference.dat").string() << "' using 1:2 with lines lw 4 lc rgb '#bbbbbb' title "
      << "'reference (1 process)', '" << (dir / "loss-elastic.dat").string()
      << "' using 1:2 with lines lw 1 lc rgb '#d62728' title 'elastic job'\n"
      << "unset logscale y\nset title 'GPUs held and plan epoch'\nset xlabel 'seconds'\nset ylabel 'GPUs'\nset y2label 'epoch'\n"
      << "set ytics nomirror\nset y2tics\nset yrange [0:*]\nset y2range [0:*]\n"
      << "plot '" << (dir / "elastic.dat").string() << "' using 1:2 with steps lw 2 title 'GPUs', '"
      << (dir / "elastic.dat").string() << "' using 1:3 axes x1y2 with steps lw 1 dt 2 title 'plan epoch'\n"
      << "unset y2label\nunset y2tics\nset ytics mirror\n"
      << "set title 'tokens/s: measured (sidecar reports) vs predicted by the planner'\nset ylabel 'tokens/s'\n"
      << "plot '" << (dir / "elastic.dat").string() << "' using 1:4 with lines lw 1 title 'measured', '"
      << (dir / "elastic.dat").string() << "' using 1:5 with steps lw 2 dt 2 title 'predicted'\n"
      << "unset multiplot\n";
  }
  process::SpawnOptions o;
  o.argv = {"gnuplot", script.string()};
  o.stdout_path = o.stderr_path = dir / "gnuplot.log";
  try {
    process::Child child = process::spawn(o);
    const auto status = child.wait_for(std::chrono::seconds(60));
    if (!status || !status->ok()) {
      if (!status) child.terminate(std::chrono::milliseconds(1000));
      std::ifstream log(dir / "gnuplot.log");
      std::string first;
      std::getline(log, first);
      return "gnuplot failed (" + (dir / "gnuplot.log").string() + "): " + first;
    }
  } catch (const std::exception& e) {
    return std::string("cannot run gnuplot (install Debian's gnuplot-nox: scripts/install-deps.sh): ") + e.what();
  }
  return fs::exists(png) ? "" : "gnuplot wrote no " + png.string();
}

}  // namespace flotilla::cli
