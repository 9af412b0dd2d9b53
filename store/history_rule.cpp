#include "store/history_rule.h"

// The change log's one rule (see history_rule.h).
namespace tributary::store {

namespace {

// The digests a state names: those of its bytes, and the blob's own
// (the sha-256 of the same bytes).
std::vector<rs::HashValue> digests(const LogHead& h) {
  std::vector<rs::HashValue> out = h.hashes;
  if (h.blob_sha256) {
    out.push_back(rs::HashValue{"sha-256", *h.blob_sha256});
  }
  return out;
}

} // namespace

LogHead head_of(const ChangeRecord& c) {
  LogHead h;
  h.change = c.change;
  h.time = c.upstream_datetime;
  if (c.change != rs::Change::deleted) {
    h.hashes = c.resource.hashes;
    h.blob_sha256 = c.resource.blob_sha256;
  }
  return h;
}

std::optional<bool> same_state(const LogHead& a, const LogHead& b) {
  if (a.deleted() || b.deleted()) {
    return a.deleted() == b.deleted();
  }
  bool compared = false;
  for (const auto& x : digests(a)) {
    for (const auto& y : digests(b)) {
      if (x.known() && x.known() == y.known()) {
        if (x.hex != y.hex) {
          return false;
        }
        compared = true;
      }
    }
  }
  return compared ? std::optional<bool>(true) : std::nullopt;
}

Admission admit(const std::optional<LogHead>& head, const ChangeRecord& c, bool applied) {
  return admit(head ? &*head : nullptr, c, applied);
}

Admission admit(const LogHead* head, const ChangeRecord& c, bool applied) {
  const std::optional<Timestamp> t = c.upstream_datetime;
  if (!head) {
    return {true, t};
  }
  const LogHead proposed = head_of(c);
  if (proposed.deleted() && head->deleted()) {
    return {false, t}; // a deletion of what is deleted moves nothing
  }
  const std::optional<bool> same = same_state(*head, proposed);
  const std::optional<Timestamp> ht = head->time;
  if (!t || !ht) {
    return {same != true, t}; // untimed on one side: only the state can tell
  }
  if (*t > *ht) {
    return {true, t};
  }
  // Not after the head. Two changes in one tick of the Source's clock, or a
  // state we applied that the log does not say yet: logged just after the
  // head, so that times never go back and no (URI, change, time) repeats.
  if ((*t == *ht && same == false) || (applied && same != true)) {
    return {true, *ht + std::chrono::microseconds(1)};
  }
  return {false, t};
}

std::vector<Admitted> admit_each(std::unordered_map<std::string, LogHead>& heads,
                                 const std::vector<ChangeRecord>& proposed,
                                 const std::unordered_map<std::string, const ResourceRecord*>& held_after,
                                 bool keep_heads) {
  // The last proposal of each URI is the one its stored state may be.
  std::unordered_map<std::string_view, size_t> last;
  last.reserve(proposed.size());
  for (size_t i = 0; i < proposed.size(); ++i) {
    last[proposed[i].resource.uri] = i;
  }
  std::vector<Admitted> out;
  out.reserve(proposed.size());
  for (size_t i = 0; i < proposed.size(); ++i) {
    const ChangeRecord& c = proposed[i];
    const std::string& uri = c.resource.uri;
    bool applied = false;
    const bool is_last = last[uri] == i;
    if (is_last) {
      if (c.change == rs::Change::deleted) {
        auto held = held_after.find(uri);
        applied = held != held_after.end() && held->second->state == ResourceState::deleted;
      } else if (auto held = held_after.find(uri); held != held_after.end() && held->second->blob_sha256) {
        applied = held->second->state == ResourceState::live && held->second->blob_sha256 == c.resource.blob_sha256;
      }
    }
    auto it = heads.find(uri);
    const Admission a = admit(it == heads.end() ? nullptr : &it->second, c, applied);
    if (!a.log) {
      continue;
    }
    out.push_back(Admitted{&c, a.time});
    if (is_last && !keep_heads) {
      continue; // no later change of this batch asks for it
    }
    LogHead next = head_of(c);
    next.time = a.time;
    if (it == heads.end()) {
      heads.emplace(uri, std::move(next));
    } else {
      it->second = std::move(next);
    }
  }
  return out;
}

std::vector<ChangeRecord> admit_all(std::unordered_map<std::string, LogHead>& heads,
                                    const std::vector<ChangeRecord>& proposed,
                                    const std::unordered_map<std::string, const ResourceRecord*>& held_after) {
  std::vector<ChangeRecord> out;
  for (const Admitted& a : admit_each(heads, proposed, held_after)) {
    out.push_back(*a.change);
    out.back().upstream_datetime = a.time;
  }
  return out;
}

} // namespace tributary::store
