// The sidecar's thin loop around the supervisor (supervisor.h): every 20 ms it turns what it
// observes into supervisor inputs and carries out the actions.
//
//   observes: the plan annotation of its own pod (pod_watch.h), SIGTERM (process/stop_flag.h),
//             the rendezvous annotation of plan.rendezvousPod (polled every 100 ms while
//             awaited), worker exits (workers.h), the workers' progress file (progress_tail.h),
//             the newest complete checkpoint (worker/launch/checkpoint_folder.h), timers.
//   does:     publishes flotilla.io/rendezvous (rendezvous pod: a fresh free port per attempt,
//             addr $POD_IP) and flotilla.io/report (merge patches on its own pod's
//             metadata.annotations: at once on a state change, else at most once per
//             --report-interval-ms and only when something changed), starts and stops workers.
//
// Guarantees: run_sidecar() returns the process exit code: 0 on Succeeded or after SIGTERM once
//   the workers stopped, 1 after the last local restart failed, 2 on a bad start (no API
//   server, no pod). Nothing waits unbounded: the rendezvous wait ends at
//   --rendezvous-timeout-s (Degraded), workers ignoring SIGTERM are SIGKILLed after the plan's stopGraceSeconds (20 s unless set).
//   Each event of the protocol is appended to <work-dir>/sidecar-events.jsonl with its wall
//   time (what bench_rescale_loop reads).
// Assumes: one sidecar per pod; the checkpoint dir and data are visible to every pod of a job.
// Caveats: a plan that does not parse is logged once and ignored until it changes.
#pragma once

#include "trainer-sidecar/options.h"

namespace flotilla::sidecar {

int run_sidecar(const Options& options);

}  // namespace flotilla::sidecar
