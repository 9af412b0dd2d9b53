#include "sync_engine/oai/list_bounds.h"


namespace tributary::sync::oai {

void ListBounds::start_list() {
  m_tokens.clear();
  m_pages = 0;
  m_budget.reset();
  m_said_size.reset();
  m_idle = 0;
}

std::optional<std::string> ListBounds::check(const Page& page) {
  ++m_pages;
  ++m_run_pages;
  if (!page.last() && !m_tokens.insert(page.resumption.token).second) {
    return "the resumptionToken '" + page.resumption.token.substr(0, 120) + "' came back after " +
           std::to_string(m_pages) + " pages of this list: the list loops; stopped there";
  }
  if (!m_budget && page.resumption.complete_list_size && !page.records.empty()) {
    const uint64_t size = *page.resumption.complete_list_size;
    const uint64_t per_page = page.records.size();
    m_said_size = size;
    m_budget = 2 * ((size + per_page - 1) / per_page) + 10;
  }
  if (m_budget && m_pages > *m_budget) {
    return "the list ran to " + std::to_string(m_pages) + " pages though its completeListSize said " +
           std::to_string(*m_said_size) + " records: stopped there";
  }
  uint64_t fresh = 0;
  for (const auto& r : page.records) {
    const std::string key = r.identifier + '\x1f' + std::to_string(r.datestamp.time_since_epoch().count());
    if (!m_seen.maybe_contains(key)) {
      m_seen.insert(key);
      ++fresh;
    }
  }
  m_idle = fresh == 0 && !page.last() ? m_idle + 1 : 0;
  if (m_idle >= m_o.idle_pages) {
    return std::to_string(m_idle) + " pages in a row brought no record this run had not read already: the list does "
                                    "not move on; stopped there";
  }
  return std::nullopt;
}

} // namespace tributary::sync::oai
