#include "kube/watcher_machine.h"

#include <gtest/gtest.h>

#include "kube/store.h"

namespace flotilla::kube {
namespace {

Json obj(const std::string& name, const std::string& rv, const std::string& ns = "default") {
  return {{"metadata", {{"name", name}, {"namespace", ns}, {"resourceVersion", rv}}}};
}

WatchEvent ev(WatchEventType t, Json o) { return {t, std::move(o)}; }

WatchEvent status_event(int code) {
  return {WatchEventType::Error,
          {{"kind", "Status"}, {"status", "Failure"}, {"code", code}, {"reason", code == 410 ? "Expired" : "InternalError"}}};
}

std::vector<WatcherEventKind> kinds(const WatcherStep& s) {
  std::vector<WatcherEventKind> out;
  for (auto& e : s.events) out.push_back(e.kind);
  return out;
}

using K = WatcherEventKind;

// The machine's next request is a watch from resourceVersion rv.
void expect_watch_from(const WatcherState& state, const std::string& rv) {
  const WatcherCommand cmd = next_command(state);
  EXPECT_EQ(cmd.kind, WatcherCommand::Kind::Watch);
  EXPECT_EQ(cmd.resource_version, rv);
}

TEST(KubeWatcherMachine, StartsByListingThenWatchesFromTheListVersion) {
  WatcherState s;
  EXPECT_EQ(next_command(s).kind, WatcherCommand::Kind::List);
  EXPECT_EQ(next_command(s).continue_token, "");
  auto r = step(s, ListPage{{obj("a", "5"), obj("b", "7")}, "10", ""});
  EXPECT_EQ(kinds(r), (std::vector<K>{K::Init, K::InitApply, K::InitApply, K::InitDone}));
  EXPECT_EQ(r.state.phase, WatcherPhase::InitListed);
  EXPECT_FALSE(r.back_off);
  expect_watch_from(r.state, "10");
}

TEST(KubeWatcherMachine, PagedListFollowsContinueTokensAndEmitsInitOnce) {
  auto r1 = step({}, ListPage{{obj("a", "5")}, "10", "tok1"});
  EXPECT_EQ(kinds(r1), (std::vector<K>{K::Init, K::InitApply}));
  EXPECT_EQ(r1.state.phase, WatcherPhase::Listing);
  EXPECT_EQ(next_command(r1.state).continue_token, "tok1");
  auto r2 = step(r1.state, ListPage{{obj("b", "6")}, "10", ""});
  EXPECT_EQ(kinds(r2), (std::vector<K>{K::InitApply, K::InitDone}));
  EXPECT_EQ(r2.state.phase, WatcherPhase::InitListed);
  EXPECT_EQ(r2.state.resource_version, "10");
}

TEST(KubeWatcherMachine, WatchEventsMoveTheResumePointAndBookmarksEmitNothing) {
  WatcherState s{WatcherPhase::InitListed, "", "10"};
  auto r = step(s, ev(WatchEventType::Added, obj("c", "11")));
  EXPECT_EQ(kinds(r), (std::vector<K>{K::Apply}));
  EXPECT_EQ(r.state.phase, WatcherPhase::Watching);
  EXPECT_EQ(r.state.resource_version, "11");
  r = step(r.state, ev(WatchEventType::Modified, obj("c", "12")));
  EXPECT_EQ(kinds(r), (std::vector<K>{K::Apply}));
  r = step(r.state, ev(WatchEventType::Deleted, obj("c", "13")));
  EXPECT_EQ(kinds(r), (std::vector<K>{K::Delete}));
  EXPECT_EQ(r.state.resource_version, "13");
  r = step(r.state, ev(WatchEventType::Bookmark, {{"metadata", {{"resourceVersion", "20"}}}}));
  EXPECT_TRUE(r.events.empty());
  EXPECT_EQ(r.state.resource_version, "20");
}

TEST(KubeWatcherMachine, DroppedStreamResumesFromLastVersionWithoutRelisting) {
  WatcherState s{WatcherPhase::Watching, "", "42"};
  auto r = step(s, WatchStreamEnded{});
  EXPECT_TRUE(r.events.empty());
  EXPECT_EQ(r.state.phase, WatcherPhase::InitListed);
  EXPECT_FALSE(r.relist);
  expect_watch_from(r.state, "42");
}

TEST(KubeWatcherMachine, GoneRelistsAtOnceFromEveryWatchingPhase) {
  for (auto phase : {WatcherPhase::InitListed, WatcherPhase::Watching}) {
    WatcherState s{phase, "", "42"};
    auto by_event = step(s, status_event(410));
    EXPECT_EQ(by_event.state.phase, WatcherPhase::Empty);
    EXPECT_TRUE(by_event.relist);
    EXPECT_FALSE(by_event.back_off);
    auto by_request = step(s, RequestFailed{error_from_response(410, R"({"kind":"Status","code":410,"reason":"Expired"})")});
    EXPECT_EQ(by_request.state.phase, WatcherPhase::Empty);
    EXPECT_EQ(next_command(by_request.state).kind, WatcherCommand::Kind::List);
  }
  // An expired continue token (410 while paging) restarts the list from the first page.
  auto r = step({WatcherPhase::Listing, "tok", ""}, RequestFailed{error_from_response(410, "")});
  EXPECT_EQ(r.state.phase, WatcherPhase::Empty);
  EXPECT_EQ(next_command(r.state).continue_token, "");
}

// kube-apiserver's answer to a resourceVersion it has not reached (also devcluster's after its
// data dir was wiped): the resume point means nothing on this server, so re-list.
TEST(KubeWatcherMachine, TooLargeResourceVersionRelistsButAPlainTimeoutBacksOff) {
  const char* too_large = R"({"kind":"Status","code":504,"reason":"Timeout","message":"Too large resource version: 90, current: 12",
    "details":{"causes":[{"reason":"ResourceVersionTooLarge","message":"Too large resource version"}],"retryAfterSeconds":1}})";
  auto r = step({WatcherPhase::Watching, "", "90"}, RequestFailed{error_from_response(504, too_large)});
  EXPECT_EQ(r.state.phase, WatcherPhase::Empty);
  EXPECT_TRUE(r.relist);
  EXPECT_FALSE(r.back_off);
  EXPECT_EQ(next_command(r.state).kind, WatcherCommand::Kind::List);
  WatchEvent ev;
  ev.type = WatchEventType::Error;
  ev.object = nlohmann::json::parse(too_large);
  r = step({WatcherPhase::InitListed, "", "90"}, ev);
  EXPECT_TRUE(r.relist);
  // A 504 without that cause is an ordinary transient failure: keep the resume point.
  r = step({WatcherPhase::Watching, "", "90"},
           RequestFailed{error_from_response(504, R"({"kind":"Status","code":504,"reason":"Timeout"})")});
  EXPECT_TRUE(r.back_off);
  EXPECT_EQ(next_command(r.state).resource_version, "90");
}

TEST(KubeWatcherMachine, OtherFailuresKeepTheStateAndAskForBackoff) {
  auto transient = RequestFailed{transport_error("connection refused")};
  auto r = step({}, transient);
  EXPECT_TRUE(r.back_off);
  EXPECT_EQ(r.state.phase, WatcherPhase::Empty);
  r = step({WatcherPhase::Listing, "tok", ""}, transient);
  EXPECT_EQ(next_command(r.state).continue_token, "tok");
  r = step({WatcherPhase::Watching, "", "9"}, transient);
  EXPECT_TRUE(r.back_off);
  EXPECT_EQ(next_command(r.state).resource_version, "9");
  r = step({WatcherPhase::Watching, "", "9"}, status_event(500));
  EXPECT_TRUE(r.back_off);
  EXPECT_EQ(r.state.phase, WatcherPhase::InitListed);
  EXPECT_EQ(r.state.resource_version, "9");
}

TEST(KubeWatcherMachine, StrayInputsAreIgnored) {
  WatcherState watching{WatcherPhase::Watching, "", "9"};
  auto r = step(watching, ListPage{{obj("x", "1")}, "1", ""});
  EXPECT_TRUE(r.events.empty());
  EXPECT_EQ(r.state.resource_version, "9");
  r = step({}, ev(WatchEventType::Added, obj("x", "1")));
  EXPECT_TRUE(r.events.empty());
  EXPECT_EQ(r.state.phase, WatcherPhase::Empty);
}

TEST(KubeStore, RelistSwapsAtomicallyAndDropsObjectsDeletedMeanwhile) {
  Store store;
  auto reader = store.reader();
  EXPECT_FALSE(reader.has_synced());
  for (auto& e : step({}, ListPage{{obj("a", "1"), obj("b", "2")}, "2", ""}).events) store.apply(e);
  EXPECT_TRUE(reader.has_synced());
  EXPECT_EQ(reader.keys(), (std::vector<std::string>{"default/a", "default/b"}));

  store.apply({K::Apply, obj("c", "3", "other")});
  EXPECT_EQ(reader.get("other", "c")->at("metadata").at("resourceVersion"), "3");
  EXPECT_EQ(reader.list_namespace("other").size(), 1u);
  store.apply({K::Delete, obj("a", "4")});
  EXPECT_FALSE(reader.get("default/a").has_value());

  // Re-list after a 410: while it is in progress readers still see the old set.
  auto relist = step({}, ListPage{{obj("b", "5")}, "5", ""}).events;
  store.apply(relist[0]);  // Init
  store.apply(relist[1]);  // InitApply b
  EXPECT_EQ(reader.size(), 2u);
  store.apply(relist[2]);  // InitDone
  EXPECT_EQ(reader.keys(), (std::vector<std::string>{"default/b"}));
  EXPECT_EQ(reader.get("default/b")->at("metadata").at("resourceVersion"), "5");
  store.set_resource_version("5");
  EXPECT_EQ(reader.resource_version(), "5");
}

TEST(KubeStore, ForEachVisitsWhatListCopiesInTheSameOrder) {
  Store store;
  for (auto& e : step({}, ListPage{{obj("b", "2"), obj("a", "1"), obj("c", "3", "other")}, "3", ""}).events)
    store.apply(e);
  std::vector<std::string> visited;
  store.reader().for_each([&](const Json& o) { visited.push_back(o["metadata"]["resourceVersion"]); });
  std::vector<std::string> listed;
  for (const Json& o : store.reader().list()) listed.push_back(o["metadata"]["resourceVersion"]);
  EXPECT_EQ(visited, listed);
  EXPECT_EQ(visited, (std::vector<std::string>{"1", "2", "3"}));  // keys default/a, default/b, other/c
}

TEST(KubeStore, ClusterScopedKeysAreBareNames) {
  Store store;
  store.apply({K::Apply, {{"metadata", {{"name", "node-1"}}}}});
  EXPECT_TRUE(store.reader().get("node-1").has_value());
}

}  // namespace
}  // namespace flotilla::kube
