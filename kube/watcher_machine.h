#pragma once
// The watcher as an explicit, pure state machine (kube-rs runtime::watcher's shape).
//
//   Empty ──list page (more)──► Listing ──last page──► InitListed ──first event──► Watching
//     ▲                                                  ▲   │                      │
//     └────────── 410 Gone (list or watch) ◄─────────────┼───┴──────────────────────┤
//                                                        └── stream ended/dropped ◄─┘
//
// - next_command(state) says what the driver must do: List (from scratch, or the next page with
//   a continue token) in Empty/Listing; Watch from resource_version in InitListed/Watching.
// - step(state, input) is pure: the new state, the events for the consumer, and whether the
//   input was a failure the driver must back off from before its next command.
// Events follow kube-rs: Init, InitApply(obj)*, InitDone on every (re-)list — a consumer that
//   buffers between Init and InitDone sees deletions that happened while it was not watching —
//   then Apply(obj) for ADDED/MODIFIED and Delete(obj) for DELETED.
// Guarantees: resource_version only moves forward to what the server sent (list metadata,
//   each event's object, BOOKMARKs); a dropped stream resumes from it, so no event is missed or
//   repeated; 410 (an expired list continue token, a watch request, or an ERROR event) drops
//   back to Empty and re-lists at once (no backoff, as client-go's reflector); any other failure
//   keeps the state and asks for backoff. A 504 whose cause is ResourceVersionTooLarge (the
//   server never reached our resourceVersion: its data was reset) re-lists like 410; waiting
//   for the server to catch up would miss every event up to that version. BOOKMARK events move the resourceVersion and emit
//   nothing.
#include <string>
#include <variant>
#include <vector>

#include "kube/error.h"
#include "kube/object.h"
#include "kube/watch_event.h"

namespace flotilla::kube {

enum class WatcherPhase { Empty, Listing, InitListed, Watching };

struct WatcherState {
  WatcherPhase phase = WatcherPhase::Empty;
  std::string continue_token;    // Listing: the next page
  std::string resource_version;  // InitListed / Watching: where the watch (re)starts
};

struct WatcherCommand {
  enum class Kind { List, Watch } kind = Kind::List;
  std::string continue_token;    // List: "" for the first page
  std::string resource_version;  // Watch
};

// Inputs: what happened after the driver ran the command.
struct ListPage {
  std::vector<Json> items;
  std::string resource_version;  // list metadata.resourceVersion
  std::string continue_token;    // list metadata.continue ("" on the last page)
};
struct WatchStreamEnded {};      // the watch connection closed, cleanly or not
struct RequestFailed {
  Error error;
};
using WatcherInput = std::variant<ListPage, WatchEvent, WatchStreamEnded, RequestFailed>;

enum class WatcherEventKind { Init, InitApply, InitDone, Apply, Delete };
struct WatcherEvent {
  WatcherEventKind kind;
  Json object;  // InitApply / Apply / Delete
};

struct WatcherStep {
  WatcherState state;
  std::vector<WatcherEvent> events;
  bool back_off = false;
  bool relist = false;  // the step dropped back to Empty because of 410 Gone
};

WatcherCommand next_command(const WatcherState& state);
WatcherStep step(const WatcherState& state, WatcherInput input);
std::string_view to_string(WatcherPhase phase);

}  // namespace flotilla::kube
