#pragma once

// Internal to the OAI-PMH harvest: what bounds one walk of a list (#50), so
// that a repository whose resumption tokens loop (A -> B -> A), or whose
// list never ends, costs a bounded number of requests and says why it was
// stopped, instead of a run that stays "running" for ever.
//
// - a token seen before in the same list ends the list, naming it;
// - where the first page gives completeListSize, the list may take twice
//   the pages that size implies, plus ten, and no more;
// - pages that bring no record this run has not read already (empty pages,
//   the same records again) end the list after `idle_pages` in a row;
// - a run reads at most `run_pages` pages; then it stops where it stands,
//   and the next run goes on from there (an honest repository that large
//   is harvested over several runs, one slot at a time).

#include "sync_engine/oai/oai_pmh.h"
#include "sync_engine/uri_bloom.h"

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>

namespace tributary::sync::oai {

struct BoundsOptions {
  uint64_t idle_pages = 200;
  uint64_t run_pages = 20000;
};

class ListBounds {
public:
  explicit ListBounds(BoundsOptions o = {}) : m_o(o) {}

  // A list starts: a window's first page, or a window walked again.
  void start_list();

  // After a page was read, before it is applied: why the walk must stop
  // here (the page is not applied), else nothing.
  std::optional<std::string> check(const Page& page);

  // After a page was applied: whether this run has read its share of pages.
  bool run_spent() const { return m_run_pages >= m_o.run_pages; }
  uint64_t run_pages() const { return m_run_pages; }

private:
  BoundsOptions m_o;
  std::unordered_set<std::string> m_tokens; // this list's
  uint64_t m_pages = 0;                     // this list's
  std::optional<uint64_t> m_budget;         // this list's, from completeListSize
  std::optional<uint64_t> m_said_size;
  UriBloom m_seen; // (identifier, datestamp) read this run: 2 to 4 bytes each
  uint64_t m_idle = 0;
  uint64_t m_run_pages = 0;
};

} // namespace tributary::sync::oai
