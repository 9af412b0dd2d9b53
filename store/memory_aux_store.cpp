#include "store/memory_aux_store.h"

#include <algorithm>
#include <chrono>
#include <tuple>

namespace tributary::store {

namespace {

rs::Timestamp now() {
  return std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
}

} // namespace

Result<void> MemoryAuxStore::put_hub_subscription(const HubSubscription& s) {
  std::lock_guard lock(m_mutex);
  auto [it, added] = m_hub.try_emplace({s.topic, s.callback}, s);
  if (added) {
    it->second.created_at = now();
    it->second.deliveries = 0;
    it->second.failures = 0;
    it->second.failures_total = 0;
    it->second.delivered_at.reset();
    it->second.retry_at.reset();
    it->second.last_error.clear();
  } else {
    it->second.secret = s.secret;
    it->second.lease_seconds = s.lease_seconds;
    it->second.expires_at = s.expires_at;
  }
  return {};
}

Result<bool> MemoryAuxStore::remove_hub_subscription(const std::string& topic, const std::string& callback) {
  std::lock_guard lock(m_mutex);
  return m_hub.erase({topic, callback}) > 0;
}

Result<std::vector<HubSubscription>> MemoryAuxStore::hub_subscriptions() {
  std::lock_guard lock(m_mutex);
  std::vector<HubSubscription> out;
  for (const auto& [key, s] : m_hub) {
    out.push_back(s);
  }
  return out;
}

Result<void> MemoryAuxStore::hub_delivered(const std::string& topic, const std::string& callback, int64_t seq,
                                           rs::Timestamp at) {
  std::lock_guard lock(m_mutex);
  if (auto it = m_hub.find({topic, callback}); it != m_hub.end()) {
    auto& s = it->second;
    s.delivered_seq = std::max(s.delivered_seq, seq);
    s.delivered_at = at;
    ++s.deliveries;
    s.failures = 0;
    s.retry_at.reset();
  }
  return {};
}

Result<void> MemoryAuxStore::hub_delivery_failed(const std::string& topic, const std::string& callback,
                                                 rs::Timestamp retry_at, const std::string& error) {
  std::lock_guard lock(m_mutex);
  if (auto it = m_hub.find({topic, callback}); it != m_hub.end()) {
    auto& s = it->second;
    ++s.failures;
    ++s.failures_total;
    s.retry_at = retry_at;
    s.last_error = error;
  }
  return {};
}

Result<void> MemoryAuxStore::add_framework_events(const std::vector<FrameworkEvent>& events) {
  std::lock_guard lock(m_mutex);
  for (auto e : events) {
    e.seq = m_next_event++;
    m_events.push_back(std::move(e));
  }
  return {};
}

Result<std::vector<FrameworkEvent>> MemoryAuxStore::framework_events(const std::string& set, int64_t after_seq,
                                                                     size_t limit) {
  std::lock_guard lock(m_mutex);
  std::vector<FrameworkEvent> out;
  for (const auto& e : m_events) {
    if (out.size() >= limit) {
      break;
    }
    if (e.set_name == set && e.seq > after_seq) {
      out.push_back(e);
    }
  }
  return out;
}

Result<int64_t> MemoryAuxStore::last_framework_seq() {
  std::lock_guard lock(m_mutex);
  return m_events.empty() ? 0 : m_events.back().seq;
}

Result<uint64_t> MemoryAuxStore::expire_framework_events(rs::Timestamp before) {
  std::lock_guard lock(m_mutex);
  const size_t was = m_events.size();
  std::erase_if(m_events, [&](const FrameworkEvent& e) { return e.at < before; });
  return was - m_events.size();
}

Result<void> MemoryAuxStore::put_push_subscription(const PushSubscription& s) {
  std::lock_guard lock(m_mutex);
  m_push[{s.source, s.topic}] = s;
  return {};
}

Result<bool> MemoryAuxStore::remove_push_subscription(const std::string& source, const std::string& topic) {
  std::lock_guard lock(m_mutex);
  return m_push.erase({source, topic}) > 0;
}

Result<std::vector<PushSubscription>> MemoryAuxStore::push_subscriptions() {
  std::lock_guard lock(m_mutex);
  std::vector<PushSubscription> out;
  for (const auto& [key, s] : m_push) {
    out.push_back(s);
  }
  return out;
}

Result<void> MemoryAuxStore::put_archived(const std::vector<ArchivedDocument>& docs) {
  std::lock_guard lock(m_mutex);
  for (auto d : docs) {
    d.archived_at = now();
    m_archived.try_emplace(d.url_path, std::move(d)); // recorded once
  }
  return {};
}

Result<std::vector<ArchivedDocument>> MemoryAuxStore::archived(const std::string& set, const std::string& kind) {
  std::lock_guard lock(m_mutex);
  std::vector<ArchivedDocument> out;
  for (const auto& [path, d] : m_archived) {
    if (d.set_name == set && d.kind == kind) {
      out.push_back(d);
    }
  }
  // As PgAuxStore: by part (none last), then at (none last), then path.
  std::sort(out.begin(), out.end(), [](const ArchivedDocument& a, const ArchivedDocument& b) {
    auto key = [](const ArchivedDocument& d) {
      return std::make_tuple(d.part == 0, d.part, !d.at.has_value(), d.at.value_or(rs::Timestamp{}), d.url_path);
    };
    return key(a) < key(b);
  });
  return out;
}

Result<std::optional<ArchivedDocument>> MemoryAuxStore::archived_document(const std::string& url_path) {
  std::lock_guard lock(m_mutex);
  if (auto it = m_archived.find(url_path); it != m_archived.end()) {
    return std::optional<ArchivedDocument>(it->second);
  }
  return std::optional<ArchivedDocument>();
}

Result<uint64_t> MemoryAuxStore::expire_archived(rs::Timestamp before) {
  std::lock_guard lock(m_mutex);
  return std::erase_if(m_archived, [&](const auto& kv) {
    const ArchivedDocument& d = kv.second;
    const bool part = d.kind == "changelist" || d.kind == "changedump" || d.kind == "changedump-package";
    return (part && d.until && *d.until < before) || (d.kind == "resourcelist" && d.at && *d.at < before);
  });
}

} // namespace tributary::store
