#include "resourcesync/model.h"

#include "common/text.h"

#include <algorithm>
#include <array>

namespace tributary::rs {

namespace {

constexpr std::array<std::pair<Capability, std::string_view>, 15> k_capabilities{{
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
    {Capability::framework_notification, "framework-notification"},
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
         c == Capability::changedump_notification || c == Capability::framework_notification;
}

bool is_manifest_capability(Capability c) {
  return c == Capability::resourcedump_manifest || c == Capability::changedump_manifest;
}

bool is_archive_capability(Capability c) {
  return c == Capability::resourcelist_archive || c == Capability::resourcedump_archive ||
         c == Capability::changelist_archive || c == Capability::changedump_archive;
}

namespace {

bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u <= 0x20 || u >= 0x7f) {
    return false;
  }
  return std::string_view("\"(),/:;<=>?@[\\]{}").find(c) == std::string_view::npos;
}

} // namespace

bool is_media_type(std::string_view s, std::string* why) {
  auto fail = [&](const char* reason) {
    if (why) {
      *why = reason;
    }
    return false;
  };
  if (s.size() > 255) {
    return fail("longer than 255 bytes");
  }
  size_t i = 0;
  auto token = [&] {
    const size_t start = i;
    while (i < s.size() && is_tchar(s[i])) {
      ++i;
    }
    return i > start;
  };
  auto ows = [&] {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) {
      ++i;
    }
  };
  if (!token() || i >= s.size() || s[i] != '/') {
    return fail("expected type/subtype");
  }
  ++i;
  if (!token()) {
    return fail("expected a subtype after '/'");
  }
  for (;;) {
    ows();
    if (i == s.size()) {
      return true;
    }
    if (s[i] != ';') {
      return fail("unexpected character after the type");
    }
    ++i;
    ows();
    if (i == s.size()) {
      return true; // a trailing ';' is common and harmless
    }
    if (!token() || i >= s.size() || s[i] != '=') {
      return fail("expected a parameter name=value");
    }
    ++i;
    if (i < s.size() && s[i] == '"') {
      ++i;
      for (;;) {
        if (i >= s.size()) {
          return fail("unterminated quoted string");
        }
        const auto u = static_cast<unsigned char>(s[i]);
        if (s[i] == '"') {
          ++i;
          break;
        }
        if (s[i] == '\\') {
          ++i;
          if (i >= s.size()) {
            return fail("unterminated quoted string");
          }
        } else if ((u < 0x20 && s[i] != '\t') || u >= 0x7f) {
          return fail("control or non-ASCII character in a parameter");
        }
        ++i;
      }
    } else if (!token()) {
      return fail("expected a parameter value");
    }
  }
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
  if (same(s, "created")) {
    return Change::created;
  }
  if (same(s, "updated")) {
    return Change::updated;
  }
  if (same(s, "deleted")) {
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

bool has_uri_scheme(std::string_view s) {
  if (s.empty() || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z'))) {
    return false;
  }
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == ':') {
      return i + 1 < s.size();
    }
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
              c == '-' || c == '.';
    if (!ok) {
      return false;
    }
  }
  return false;
}

} // namespace tributary::rs
