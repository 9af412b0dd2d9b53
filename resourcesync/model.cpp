#include "resourcesync/model.h"

#include <algorithm>
#include <array>

namespace tributary::rs {

namespace {

constexpr std::array<std::pair<Capability, std::string_view>, 14> k_capabilities{{
    {Capability::description, "description"},
    {Capability::capabilitylist, "capabilitylist"},
    {Capability::resourcelist, "resourcelist"},
    {Capability::resourcedump, "resourcedump"},
    {Capability::resourcedump_manifest, "resourcedump-manifest"},
    {Capability::changelist, "changelist"},
    {Capability::changedump, "changedump"},
    {Capability::changedump_manifest, "changedump-manifest"},
    {Capability::resourcelist_archive, "resourcelist-archive"},
    {Capability::resourcedump_archive, "resourcedump-archive"},
    {Capability::changelist_archive, "changelist-archive"},
    {Capability::changedump_archive, "changedump-archive"},
    {Capability::changelist_notification, "changelist-notification"},
    {Capability::changedump_notification, "changedump-notification"},
}};

} // namespace

std::string_view to_string(RootElement r) {
  return r == RootElement::urlset ? "urlset" : "sitemapindex";
}

std::string_view to_string(Capability c) {
  for (const auto& [cap, name] : k_capabilities) {
    if (cap == c) {
      return name;
    }
  }
  return "";
}

std::optional<Capability> capability_from_string(std::string_view s) {
  for (const auto& [cap, name] : k_capabilities) {
    if (name == s) {
      return cap;
    }
  }
  return std::nullopt;
}

bool is_snapshot_capability(Capability c) {
  return c == Capability::resourcelist || c == Capability::resourcedump ||
         c == Capability::resourcedump_manifest;
}

bool is_change_capability(Capability c) {
  return c == Capability::changelist || c == Capability::changedump ||
         c == Capability::changedump_manifest || c == Capability::changelist_notification ||
         c == Capability::changedump_notification;
}

bool is_manifest_capability(Capability c) {
  return c == Capability::resourcedump_manifest || c == Capability::changedump_manifest;
}

bool is_archive_capability(Capability c) {
  return c == Capability::resourcelist_archive || c == Capability::resourcedump_archive ||
         c == Capability::changelist_archive || c == Capability::changedump_archive;
}

std::string_view to_string(Change c) {
  switch (c) {
  case Change::created:
    return "created";
  case Change::updated:
    return "updated";
  case Change::deleted:
    return "deleted";
  }
  return "";
}

std::optional<Change> change_from_string(std::string_view s) {
  if (s == "created") {
    return Change::created;
  }
  if (s == "updated") {
    return Change::updated;
  }
  if (s == "deleted") {
    return Change::deleted;
  }
  return std::nullopt;
}

const Link* Entry::find_link(std::string_view rel) const {
  for (const auto& l : links) {
    if (l.rel == rel) {
      return &l;
    }
  }
  return nullptr;
}

std::vector<const Link*> Entry::links_by_priority(std::string_view rel) const {
  std::vector<const Link*> out;
  for (const auto& l : links) {
    if (l.rel == rel) {
      out.push_back(&l);
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Link* a, const Link* b) {
    return a->effective_pri() < b->effective_pri();
  });
  return out;
}

const Link* DocumentHeader::find_link(std::string_view rel) const {
  for (const auto& l : links) {
    if (l.rel == rel) {
      return &l;
    }
  }
  return nullptr;
}

} // namespace tributary::rs
