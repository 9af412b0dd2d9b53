#include "resourcesync/validator.h"

#include <array>

namespace tributary::rs {

namespace {

bool is_changefreq(std::string_view s) {
  static constexpr std::array<std::string_view, 7> k_values{"always", "hourly", "daily", "weekly",
                                                          "monthly", "yearly", "never"};
  for (auto v : k_values) {
    if (v == s) {
      return true;
    }
  }
  return false;
}

// Root element each capability may use: nullopt means either.
std::optional<RootElement> required_root(Capability c) {
  switch (c) {
  case Capability::description:
  case Capability::capabilitylist:
  case Capability::resourcedump_manifest:
  case Capability::changedump_manifest:
  case Capability::changelist_notification:
  case Capability::changedump_notification:
  case Capability::framework_notification:
    return RootElement::urlset;
  default:
    return std::nullopt;
  }
}

std::string dt(Timestamp t) { return format_w3c_datetime(t); }

} // namespace

Validator::Validator(Sink sink) : m_sink(std::move(sink)) {}

void Validator::header(const DocumentHeader& h, uint64_t line) {
  m_header = h;
  auto err = [&](std::string m) { m_sink(Severity::error, line, std::move(m)); };
  auto warn = [&](std::string m) { m_sink(Severity::warning, line, std::move(m)); };

  if (!h.md) {
    err("the document has no <rs:md> (mandatory, with a capability attribute)");
  } else if (!h.md->capability) {
    err("the document's <rs:md> has no capability attribute (mandatory)");
  } else {
    m_capability = h.md->capability_kind();
    if (!m_capability) {
      err("unknown capability '" + *h.md->capability + "'");
    }
  }
  for (const auto& l : h.links) {
    check_link(l, line, "the document's");
  }
  if (!m_capability) {
    return;
  }
  const Capability cap = *m_capability;
  const std::string name(to_string(cap));
  const bool index = h.root == RootElement::sitemapindex;
  if (auto root = required_root(cap); root && *root != h.root) {
    err("a document with capability '" + name + "' must have root <" +
        std::string(to_string(*root)) + ">, not <" + std::string(to_string(h.root)) + ">");
  }

  const Metadata& md = *h.md;
  if (is_snapshot_capability(cap)) {
    if (!md.at && !h.plain_sitemap) {
      // Appendix A requires it, but real Sources omit it (Timbuctoo's and
      // older resync Resource Lists) and the reference client reads them:
      // a baseline from such a list cannot tell which later changes it
      // already shows, so a Destination applies every change it sees.
      warn("a " + name + (index ? " index" : "") +
           " without an 'at' attribute on its <rs:md> (Appendix A requires one): the time it shows is unknown");
    }
    if (md.from || md.until) {
      warn("'from'/'until' are not used in a " + name + " (Appendix A); ignored");
    }
  } else if (is_change_capability(cap)) {
    const bool mandatory = cap == Capability::changelist || cap == Capability::changedump ||
                           cap == Capability::changedump_manifest;
    if (!md.from && mandatory) {
      // Appendix A requires it, but real Sources omit it (resync-simulator,
      // whenever the oldest change it remembers is a deletion) and the
      // reference client reads such documents: a reader takes the first
      // change's time instead.
      warn("a " + name + (index ? " index" : "") +
           " without a 'from' attribute on its <rs:md> (Appendix A requires one): the first change's time is taken "
           "instead");
    }
    if (md.at || md.completed) {
      warn("'at'/'completed' are not used in a " + name + " (Appendix A); ignored");
    }
  }
  if (md.at && md.completed && *md.completed < *md.at) {
    err("'completed' " + dt(*md.completed) + " is before 'at' " + dt(*md.at));
  }
  if (md.from && md.until && *md.until < *md.from) {
    err("'until' " + dt(*md.until) + " is before 'from' " + dt(*md.from));
  }
  for (const char* attr : {"change", "hash", "length", "type", "path", "datetime"}) {
    bool present = (attr == std::string_view("change") && md.change) ||
                   (attr == std::string_view("hash") && !md.hash.empty()) ||
                   (attr == std::string_view("length") && md.length) ||
                   (attr == std::string_view("path") && md.path) ||
                   (attr == std::string_view("datetime") && md.datetime);
    if (present) {
      warn(std::string("attribute '") + attr + "' describes a resource, not a document; ignored on the document's <rs:md>");
    }
  }
  if (cap != Capability::description && !h.find_link("up") && !h.plain_sitemap) {
    warn("no <rs:ln rel=\"up\"> to the " +
         std::string(cap == Capability::capabilitylist ? "Source Description" : "Capability List"));
  }
}

void Validator::check_link(const Link& l, uint64_t line, std::string_view where, bool of_entry) {
  if (l.pri && (*l.pri < 1 || *l.pri > 999999)) {
    std::string m = std::string(where) + " <rs:ln rel=\"" + l.rel + "\"> has pri " + std::to_string(*l.pri) +
                    ", outside 1..999999";
    if (of_entry) {
      fault(line, std::move(m));
    } else {
      m_sink(Severity::error, line, std::move(m));
    }
  }
  if (!l.href.empty() && !has_uri_scheme(l.href)) {
    m_sink(Severity::warning, line,
           std::string(where) + " <rs:ln rel=\"" + l.rel + "\"> href '" + l.href + "' is not an absolute URI");
  }
}

void Validator::fault(uint64_t line, std::string message) {
  if (m_check.faults++ == 0) {
    m_check.first_fault = message;
  }
  m_sink(Severity::error, line, std::move(message));
}

Validator::EntryCheck Validator::entry(const Entry& e, uint64_t line) {
  m_check = EntryCheck{};
  check_entry(e, line);
  return std::move(m_check);
}

void Validator::check_entry(const Entry& e, uint64_t line) {
  ++m_entries;
  auto err = [&](std::string m) { fault(line, std::move(m)); };
  auto warn = [&](std::string m) { m_sink(Severity::warning, line, std::move(m)); };

  // Past the spec's limits a document is still read (a warning, once): an
  // honest Source that writes one list of 60,000 must not lose its feed.
  // The fetch limit (128 MiB) bounds what is read; what we write keeps to
  // the limits (writer.cpp).
  if (m_entries == k_max_entries + 1) {
    m_sink(Severity::warning, line, "more than " + std::to_string(k_max_entries) +
        " entries: a document should be split and grouped by an index (spec section 7); read on");
  }
  if (e.loc.empty()) {
    m_check.loc_fault = "an entry has no <loc> (mandatory)";
    err(m_check.loc_fault);
  } else if (!has_uri_scheme(e.loc)) {
    m_check.loc_fault = "<loc> '" + e.loc.substr(0, 200) + "' is not an absolute URI";
    err(m_check.loc_fault);
  } else if (e.loc.size() > 2048) {
    warn("<loc> is " + std::to_string(e.loc.size()) + " characters, over the Sitemap limit of 2048");
  }
  if (e.changefreq && !is_changefreq(*e.changefreq)) {
    warn("<changefreq> '" + *e.changefreq + "' is not one of always, hourly, daily, weekly, monthly, yearly, never");
  }
  for (const auto& l : e.links) {
    check_link(l, line, "entry's", true);
  }
  if (!m_capability) {
    return;
  }
  check_entry_md(e, line);
  // Entries that are changes (a Change Dump's entries are packages).
  if (is_change_capability(*m_capability) && *m_capability != Capability::changedump &&
      m_header.root == RootElement::urlset) {
    check_change_entry(e, line);
  }
  if (is_manifest_capability(*m_capability)) {
    check_path(e, line);
  }
  if ((*m_capability == Capability::resourcelist || *m_capability == Capability::resourcedump_manifest) &&
      m_header.root == RootElement::urlset && !e.loc.empty() && m_seen_locs.size() < 4 * k_max_entries) {
    if (!m_seen_locs.insert(e.loc).second) {
      warn("<loc> '" + e.loc + "' is listed more than once");
    }
  }
}

void Validator::check_entry_md(const Entry& e, uint64_t line) {
  auto err = [&](std::string m) { fault(line, std::move(m)); };
  auto warn = [&](std::string m) { m_sink(Severity::warning, line, std::move(m)); };
  const Capability cap = *m_capability;
  const bool index = m_header.root == RootElement::sitemapindex;

  if (cap == Capability::description || cap == Capability::capabilitylist) {
    if (!e.md || !e.md->capability) {
      err("entry '" + e.loc + "' has no capability on its <rs:md> (mandatory in a " +
          std::string(to_string(cap)) + ")");
      return;
    }
    auto kind = e.md->capability_kind();
    if (!kind) {
      err("entry '" + e.loc + "' has unknown capability '" + *e.md->capability + "'");
      return;
    }
    if (cap == Capability::description && *kind != Capability::capabilitylist) {
      warn("a Source Description lists Capability Lists, but entry '" + e.loc + "' has capability '" +
           std::string(to_string(*kind)) + "'");
    }
    if (cap == Capability::capabilitylist) {
      if (*kind == Capability::description || *kind == Capability::capabilitylist ||
          is_manifest_capability(*kind)) {
        warn("a Capability List does not list documents of capability '" +
             std::string(to_string(*kind)) + "' (entry '" + e.loc + "')");
      }
      if (!m_seen_capabilities.insert(*e.md->capability).second) {
        err("capability '" + *e.md->capability +
            "' is listed twice: a Capability List has one entry per capability (spec section 9)");
      }
    }
    return;
  }
  if (!e.md) {
    return;
  }
  const Metadata& md = *e.md;
  if (md.capability && cap != Capability::description && cap != Capability::capabilitylist &&
      !is_archive_capability(cap)) {
    warn("entry '" + e.loc + "' has a capability attribute, which only Source Descriptions and "
         "Capability Lists use");
  }
  if (md.at && md.completed && *md.completed < *md.at) {
    err("entry '" + e.loc + "': 'completed' is before 'at'");
  }
  if (md.from && md.until && *md.until < *md.from) {
    err("entry '" + e.loc + "': 'until' " + dt(*md.until) + " is before 'from' " + dt(*md.from));
  }
  // Appendix A, child level: at/completed only on snapshot indexes and
  // resource dumps; from/until only on change indexes and change dumps.
  const bool takes_at = (cap == Capability::resourcelist && index) || cap == Capability::resourcedump;
  const bool takes_from = (cap == Capability::changelist && index) || cap == Capability::changedump;
  if ((md.at || md.completed) && !takes_at && !is_archive_capability(cap)) {
    warn("entry '" + e.loc + "': 'at'/'completed' are not used on entries of a " +
         std::string(to_string(cap)) + (index ? " index" : "") + " (Appendix A); ignored");
  }
  if ((md.from || md.until) && !takes_from && !is_archive_capability(cap)) {
    warn("entry '" + e.loc + "': 'from'/'until' are not used on entries of a " +
         std::string(to_string(cap)) + (index ? " index" : "") + " (Appendix A); ignored");
  }
  if (takes_from && !md.from) {
    warn("entry '" + e.loc + "' has no 'from' (recommended on entries of a " +
         std::string(to_string(cap)) + (index ? " index" : "") + ")");
  }
  if (takes_from && md.from) {
    if (m_last_time && *md.from < *m_last_time) {
      m_out_of_order = true;
      m_sink(Severity::warning, line, "entry '" + e.loc + "' (from " + dt(*md.from) + ") is listed after one from " +
          dt(*m_last_time) + ": change documents must be in forward chronological order (read in the order of their times)");
    }
    m_last_time = md.from;
  }
}

void Validator::check_change_entry(const Entry& e, uint64_t line) {
  auto err = [&](std::string m) { fault(line, std::move(m)); };
  const std::string name(to_string(*m_capability));
  if (!e.md || !e.md->change) {
    err("entry '" + e.loc + "' has no change attribute (mandatory in a " + name + "; read as 'updated')");
  }
  auto t = e.change_time();
  if (!t) {
    // Spec 1.1 example 19 itself has one. A reader gives it the time of the
    // change before it (or the document's from, until, or when it was read).
    m_sink(Severity::warning, line,
           "entry '" + e.loc + "' has neither <lastmod> nor a datetime attribute (mandatory in a " + name +
               "): read as changed with the change before it, or at the document's from, until, or when it was read");
    return;
  }
  if (m_last_time && *t < *m_last_time) {
    // A Source whose clock was corrected appends changes dated before the
    // ones it wrote while it was wrong: sorted by time, not refused.
    m_out_of_order = true;
    m_sink(Severity::warning, line, "entry '" + e.loc + "' changed at " + dt(*t) + " is listed after a change at " + dt(*m_last_time) +
        " (line " + std::to_string(m_last_time_line) + "): entries must be in forward chronological order (sorted by time before they are applied)");
  }
  if (!m_last_time || *t >= *m_last_time) {
    m_last_time = t;
    m_last_time_line = line;
  }
  const Metadata* md = m_header.md ? &*m_header.md : nullptr;
  if (md && md->from && *t < *md->from) {
    err("entry '" + e.loc + "' changed at " + dt(*t) + ", before the document's from " + dt(*md->from));
  }
  if (md && md->until && *t > *md->until) {
    err("entry '" + e.loc + "' changed at " + dt(*t) + ", after the document's until " + dt(*md->until));
  }
}

void Validator::check_path(const Entry& e, uint64_t line) {
  auto err = [&](std::string m) { fault(line, std::move(m)); };
  auto warn = [&](std::string m) { m_sink(Severity::warning, line, std::move(m)); };
  const bool deleted = e.md && e.md->change == Change::deleted;
  if (!e.md || !e.md->path) {
    if (!deleted) {
      err("entry '" + e.loc + "' has no path attribute (mandatory in a manifest)");
    }
    return;
  }
  const std::string& p = *e.md->path;
  if (deleted) {
    warn("entry '" + e.loc + "' is deleted but has a path");
  }
  if (p.empty() || p == "/") {
    err("entry '" + e.loc + "' has an empty path");
    return;
  }
  if (p.find('\0') != std::string::npos || p.find('\\') != std::string::npos) {
    err("entry '" + e.loc + "' has an unsafe path '" + p + "'");
    return;
  }
  // Any ".." segment could escape the package when unpacked.
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) {
      end = p.size();
    }
    if (p.compare(start, end - start, "..") == 0) {
      err("entry '" + e.loc + "' has path '" + p + "' with a '..' segment");
      return;
    }
    start = end + 1;
  }
  if (p[0] != '/') {
    warn("entry '" + e.loc + "' has path '" + p + "' without the leading slash");
  }
}

void Validator::finish(uint64_t bytes) {
  if (bytes > k_max_document_bytes) {
    m_sink(Severity::warning, 0,
           "document is " + std::to_string(bytes) + " bytes uncompressed, over the limit of " +
               std::to_string(k_max_document_bytes) + " (spec section 7); read on");
  }
}

std::vector<Diagnostic> validate(const Document& document, uint64_t bytes) {
  std::vector<Diagnostic> out;
  Validator v([&out](Severity s, uint64_t line, std::string m) {
    out.push_back(Diagnostic{s, line, std::move(m)});
  });
  v.header(document.header, 0);
  for (const auto& e : document.entries) {
    v.entry(e, 0);
  }
  v.finish(bytes);
  return out;
}

} // namespace tributary::rs
