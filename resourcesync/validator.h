#pragma once

#include "resourcesync/model.h"

#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

namespace tributary::rs {

// Checks a document against the ResourceSync rules as it streams past:
// mandatory `rs:md` and capability, root element vs capability, the time
// attribute rules of Appendix A, `change` values, forward chronological
// order, change times within from/until, `pri` range, loc and path syntax,
// and the 50,000-entry / 50 MB limits. Value syntax (datetimes, hashes,
// numbers) is checked by the reader, which drops values that do not parse.
//
// Errors make a document invalid; warnings note deviations a Destination can
// live with (a missing recommended link, a path without its leading slash).
class Validator {
public:
  using Sink = std::function<void(Severity, uint64_t line, std::string message)>;

  explicit Validator(Sink sink);

  // Call once, before the first entry. `line` is that of the root element.
  void header(const DocumentHeader& header, uint64_t line);
  // What one entry broke: `faults` errors of its own (ordering errors and
  // the entry count are the document's, not counted here).
  struct EntryCheck {
    uint64_t faults = 0;
    std::string first_fault;
    // Set when the entry's `<loc>` is unusable (none, or not an absolute
    // URI): the one fault that costs a reader the entry.
    std::string loc_fault;
  };
  // Call for each entry in document order.
  EntryCheck entry(const Entry& entry, uint64_t line);
  // Call at the end with the uncompressed document size.
  void finish(uint64_t bytes);
  // Whether entries came out of time order (a warning each): a reader
  // sorts them by time before applying them.
  bool out_of_order() const { return m_out_of_order; }

private:
  void fault(uint64_t line, std::string message);
  void check_entry(const Entry& entry, uint64_t line);
  // A bad pri is a fault of the entry `of_entry`, else of the document.
  void check_link(const Link& link, uint64_t line, std::string_view where, bool of_entry = false);
  void check_entry_md(const Entry& entry, uint64_t line);
  void check_change_entry(const Entry& entry, uint64_t line);
  void check_path(const Entry& entry, uint64_t line);

  Sink m_sink;
  DocumentHeader m_header;
  std::optional<Capability> m_capability;
  uint64_t m_entries = 0;
  std::optional<Timestamp> m_last_time;
  uint64_t m_last_time_line = 0;
  std::unordered_set<std::string> m_seen_locs;
  std::unordered_set<std::string> m_seen_capabilities;
  EntryCheck m_check; // of the entry being checked
  bool m_out_of_order = false;
};

// Validates an in-memory document (diagnostics carry line 0).
std::vector<Diagnostic> validate(const Document& document, uint64_t bytes = 0);

} // namespace tributary::rs
