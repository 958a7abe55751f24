// The one line that says why a torchrun agent failed, from its log (its own output and its
// ranks', which it does not redirect): what the sidecar reports for worker kind megatron.
//
// Guarantees: torchrun_failure_line() returns, in this order of preference,
//   - the first Python exception line of a rank ("RuntimeError: CUDA out of memory ...", with
//     a "[rank3]:"-style prefix removed), torchrun's own ChildFailedError excepted;
//   - the first argparse error ("pretrain_gpt.py: error: unrecognized arguments: --x");
//   - torchrun's root-cause summary (torch/distributed/elastic/multiprocessing/errors:
//     _FAILURE_FORMAT_TEMPLATE) as "rank R (local_rank: L) exitcode E (pid: P)", followed by
//     its traceback field when that says more than torchrun's "To enable traceback see: ..."
//     placeholder (e.g. "Signal 9 (SIGKILL) received by PID 123");
//   - "" when none is there (the caller falls back to how the process ended).
//   The line is trimmed and at most 400 characters.
// Assumes: the log is text; lines end in '\n'.
// Caveats: pure (no I/O). With several failing ranks the first exception in the file is
//   taken, which is usually but not always the root cause (torchrun's summary names it by time).
#pragma once

#include <string>
#include <string_view>

namespace flotilla::sidecar {

std::string torchrun_failure_line(std::string_view log_text);

}  // namespace flotilla::sidecar
