#include "kube/watcher_machine.h"

namespace flotilla::kube {

std::string_view to_string(WatcherPhase phase) {
  switch (phase) {
    case WatcherPhase::Empty: return "Empty";
    case WatcherPhase::Listing: return "Listing";
    case WatcherPhase::InitListed: return "InitListed";
    case WatcherPhase::Watching: return "Watching";
  }
  return "?";
}

WatcherCommand next_command(const WatcherState& state) {
  switch (state.phase) {
    case WatcherPhase::Empty: return {WatcherCommand::Kind::List, "", ""};
    case WatcherPhase::Listing: return {WatcherCommand::Kind::List, state.continue_token, ""};
    case WatcherPhase::InitListed:
    case WatcherPhase::Watching: return {WatcherCommand::Kind::Watch, "", state.resource_version};
  }
  return {};
}

namespace {

WatcherStep on_list_page(const WatcherState& state, ListPage page) {
  WatcherStep out;
  if (state.phase != WatcherPhase::Empty && state.phase != WatcherPhase::Listing) {
    out.state = state;  // a stray page: nothing asked for it
    return out;
  }
  if (state.phase == WatcherPhase::Empty) out.events.push_back({WatcherEventKind::Init, {}});
  for (auto& item : page.items) out.events.push_back({WatcherEventKind::InitApply, std::move(item)});
  if (!page.continue_token.empty()) {
    out.state = {WatcherPhase::Listing, std::move(page.continue_token), ""};
  } else {
    out.events.push_back({WatcherEventKind::InitDone, {}});
    // The last page's resourceVersion is the snapshot's (the continue token pins it).
    out.state = {WatcherPhase::InitListed, "", std::move(page.resource_version)};
  }
  return out;
}

WatcherStep relist() {
  WatcherStep out;
  out.state = {WatcherPhase::Empty, "", ""};
  out.relist = true;
  return out;
}

WatcherStep on_watch_event(const WatcherState& state, WatchEvent event) {
  if (state.phase != WatcherPhase::InitListed && state.phase != WatcherPhase::Watching)
    return {state, {}, false, false};
  if (event.type == WatchEventType::Error) {
    Error e = event.status_error();
    if (e.kind == ErrorKind::Gone || e.resource_version_too_large()) return relist();
    WatcherStep out{state, {}, true, false};
    out.state.phase = WatcherPhase::InitListed;  // the server ends the stream after ERROR
    return out;
  }
  WatcherStep out;
  out.state = {WatcherPhase::Watching, "", state.resource_version};
  if (auto rv = object_resource_version(event.object); !rv.empty()) out.state.resource_version = rv;
  switch (event.type) {
    case WatchEventType::Added:
    case WatchEventType::Modified:
      out.events.push_back({WatcherEventKind::Apply, std::move(event.object)});
      break;
    case WatchEventType::Deleted:
      out.events.push_back({WatcherEventKind::Delete, std::move(event.object)});
      break;
    case WatchEventType::Bookmark:
    case WatchEventType::Error:
      break;
  }
  return out;
}

}  // namespace

WatcherStep step(const WatcherState& state, WatcherInput input) {
  if (auto* page = std::get_if<ListPage>(&input)) return on_list_page(state, std::move(*page));
  if (auto* event = std::get_if<WatchEvent>(&input)) return on_watch_event(state, std::move(*event));
  if (std::holds_alternative<WatchStreamEnded>(input)) {
    WatcherStep out{state, {}, false, false};
    if (state.phase == WatcherPhase::Watching) out.state.phase = WatcherPhase::InitListed;
    return out;
  }
  const auto& failed = std::get<RequestFailed>(input);
  if (failed.error.kind == ErrorKind::Gone || failed.error.resource_version_too_large()) return relist();
  WatcherStep out{state, {}, true, false};
  if (state.phase == WatcherPhase::Watching) out.state.phase = WatcherPhase::InitListed;
  return out;
}

}  // namespace flotilla::kube
