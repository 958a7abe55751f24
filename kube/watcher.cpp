#include "kube/watcher.h"

#include <random>

namespace flotilla::kube {

Watcher::Watcher(std::shared_ptr<Client> client, Resource resource, std::string ns,
                 WatcherOptions options, std::shared_ptr<const Clock> clock)
    : client_(std::move(client)),
      resource_(std::move(resource)),
      ns_(std::move(ns)),
      options_(std::move(options)),
      clock_(std::move(clock)),
      backoff_(options_.backoff, options_.seed ? options_.seed : std::random_device{}()) {}

WatcherState Watcher::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

WatcherStats Watcher::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

bool Watcher::apply(WatcherInput input, const std::function<void(const WatcherEvent&)>& on_event) {
  const bool is_watch_event = std::holds_alternative<WatchEvent>(input);
  WatcherStep s;
  {
    std::lock_guard lock(mu_);
    s = step(state_, std::move(input));
    state_ = s.state;
    if (s.relist) ++stats_.relists_on_gone;
    if (s.back_off) ++stats_.failures;
    for (const auto& e : s.events)
      if (e.kind == WatcherEventKind::InitDone) ++stats_.lists_completed;
  }
  for (const auto& e : s.events) on_event(e);
  if (is_watch_event && !s.back_off && !s.relist) {
    backoff_.reset();
    relists_without_event_ = 0;
  }
  if (s.relist && relists_without_event_++ > 0) return true;
  return s.back_off;
}

void Watcher::run(std::stop_token stop, const std::function<void(const WatcherEvent&)>& on_event) {
  while (!stop.stop_requested()) {
    WatcherCommand cmd;
    {
      std::lock_guard lock(mu_);
      cmd = next_command(state_);
    }
    bool back_off = false;
    if (cmd.kind == WatcherCommand::Kind::List) {
      ListOptions lo;
      lo.label_selector = options_.label_selector;
      lo.field_selector = options_.field_selector;
      lo.limit = options_.page_size;
      lo.continue_token = cmd.continue_token;
      auto r = client_->list(resource_, ns_, lo);
      if (!r) {
        if (options_.on_request_failed) options_.on_request_failed(r.error());
        back_off = apply(RequestFailed{r.error()}, on_event);
      } else {
        ListPage page;
        auto& list = *r;
        if (auto items = list.find("items"); items != list.end() && items->is_array())
          for (auto& item : *items) {
            // List items omit apiVersion/kind; restore them so consumers see whole objects.
            if (!item.contains("apiVersion")) item["apiVersion"] = resource_.api_version();
            if (!item.contains("kind") && !resource_.kind.empty()) item["kind"] = resource_.kind;
            page.items.push_back(std::move(item));
          }
        if (auto meta = list.find("metadata"); meta != list.end() && meta->is_object()) {
          page.resource_version = meta->value("resourceVersion", "");
          page.continue_token = meta->value("continue", "");
        }
        back_off = apply(std::move(page), on_event);
      }
    } else {
      WatchOptions wo;
      wo.resource_version = cmd.resource_version;
      wo.label_selector = options_.label_selector;
      wo.field_selector = options_.field_selector;
      wo.allow_bookmarks = options_.allow_bookmarks;
      wo.timeout_seconds = options_.watch_timeout_seconds;
      {
        std::lock_guard lock(mu_);
        ++stats_.watches_opened;
      }
      bool stream_broke_off = false;  // the machine left the stream (ERROR event)
      auto r = client_->watch(
          resource_, ns_, wo,
          [&](WatchEvent event) {
            bool is_error = event.type == WatchEventType::Error;
            back_off = apply(std::move(event), on_event) || back_off;
            if (is_error) stream_broke_off = true;
            return !is_error && !stop.stop_requested();
          },
          stop);
      if (stop.stop_requested()) break;
      if (!r) {
        if (options_.on_request_failed) options_.on_request_failed(r.error());
        back_off = apply(RequestFailed{r.error()}, on_event) || back_off;
      } else if (!stream_broke_off) {
        back_off = apply(WatchStreamEnded{}, on_event) || back_off;
      }
    }
    if (back_off && !stop.stop_requested()) clock_->sleep_for(backoff_.next(), stop);
  }
}

}  // namespace flotilla::kube
