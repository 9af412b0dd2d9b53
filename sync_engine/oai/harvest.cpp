// An OAI-PMH repository followed as a Source (#36): its records become the
// changes the engine already applies (baseline_batch, change_batch), with
// the record's metadata as content, its datestamp as lastmod and time, its
// sets as rel="collection" links, and status="deleted" as a deletion.
//
// Resumption: after every page, the next page's URL, its token's expiry and
// the window under way go into the feed's watermark (Watermark::resume), in
// the transaction of that page's batch, so that a crash or a restart goes
// on from the page after the last one applied. A token the repository no
// longer honours (badResumptionToken, or past its expirationDate) restarts
// the window under way: from the datestamp the last complete harvest
// reached, never from the start.
#include "sync_engine/oai/harvest.h"

#include "common/log.h"
#include "common/percent.h"
#include "resourcesync/hash.h"
#include "sync_engine/oai/list_bounds.h"
#include "sync_engine/oai/oai_pmh.h"
#include "sync_engine/oai/resume.h"
#include "sync_engine/feed_writer.h"
#include "sync_engine/run_context.h"


#include <optional>
#include <unordered_map>

namespace tributary::sync {

namespace {

using namespace std::chrono;
using oai::Granularity;

constexpr uint64_t k_max_page_bytes = 64ull * 1024 * 1024;
constexpr size_t k_slice = 1000; // records of a page applied together
constexpr std::chrono::seconds k_baseline_window{365 * 86400};
constexpr std::chrono::seconds k_open_span{100ll * 365 * 86400}; // an incremental's window: the whole

rs::Timestamp now_ts() {
  return time_point_cast<microseconds>(system_clock::now());
}

using oai::Resume;

class Harvest {
public:
  Harvest(RunContext& ctx, int64_t feed, const OaiFeed& f) : m_ctx(ctx), m_feed(feed), m_f(f) {}

  Result<void> run() {
    auto id = identify();
    if (!id) {
      return tl::unexpected(id.error());
    }
    m_id = *id;
    m_claimed_earliest = m_id.earliest_datestamp;
    if (auto offered = offers(); !offered) {
      return offered;
    }
    auto wm = m_ctx.settled_watermark(m_feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    m_w = *wm;
    if (m_ctx.opt().mode == store::RunMode::audit) {
      return audit();
    }
    const bool fresh = !m_w.baseline_at && !m_w.last_time;
    const bool baseline = m_ctx.opt().mode == store::RunMode::baseline || fresh;
    if (fresh && m_ctx.opt().mode != store::RunMode::baseline) {
      m_ctx.note("never harvested: baseline first");
    }
    auto saved = Resume::load(m_w.resume);
    const std::string mode = baseline ? "baseline" : "incremental";
    if (saved && saved->mode == mode) {
      m_state = *saved;
      if (baseline) {
        m_state.resumed_baseline = true; // pages before this run's were seen by an earlier run
      }
      if (!m_state.next.empty() && m_state.expires && *m_state.expires <= now_ts()) {
        m_ctx.note("the resumption token expired (" + rs::format_w3c_datetime(*m_state.expires) +
                   "): the window is harvested again from its start");
        m_state.next.clear();
      } else if (!m_state.next.empty()) {
        m_ctx.note("harvest resumed at the page after the last one applied");
      }
    } else {
      m_state = Resume{};
      m_state.mode = mode;
      if (!baseline && m_w.last_time) {
        m_state.from = *m_w.last_time - duration_cast<microseconds>(m_ctx.src().oai.overlap);
      }
      if (baseline) {
        clamp_earliest();
      }
      if (baseline && m_id.earliest_datestamp) {
        // A year at a time from the earliest datestamp (the first window
        // open at its start, for records dated before it): a token that
        // expires costs the year under way, not the repository.
        m_state.span_seconds = k_baseline_window.count();
        m_state.until = *m_id.earliest_datestamp + k_baseline_window;
        if (*m_state.until >= now_ts()) {
          m_state.until.reset();
        }
      }
    }
    m_initial_span = baseline ? k_baseline_window.count() : k_open_span.count();
    if (auto r = harvest(baseline); !r) {
      return r;
    }
    return finish(baseline);
  }

private:
  Result<std::string> fetch(const std::string& url) { return fetch_body(m_ctx, url, k_max_page_bytes); }

  Result<oai::Identify> identify() {
    const std::string url = oai::identify_url(m_f.base_url);
    auto body = fetch(url);
    if (!body) {
      return tl::unexpected(body.error());
    }
    auto id = oai::parse_identify(*body);
    if (!id) {
      return make_error(id.error().kind, url + ": " + id.error().message);
    }
    return id;
  }

  // ListMetadataFormats (and ListSets, when sets are configured): a prefix
  // or set the repository does not offer is a mistake in the config, said
  // as such, not a harvest of nothing. A repository that answers neither
  // is harvested all the same.
  Result<void> offers() {
    if (auto body = fetch(oai::list_metadata_formats_url(m_f.base_url))) {
      if (auto formats = oai::parse_metadata_formats(*body); formats && !formats->empty()) {
        std::string names;
        for (const auto& f : *formats) {
          if (f.prefix == m_f.prefix) {
            names.clear();
            break;
          }
          names += (names.empty() ? "" : ", ") + f.prefix;
        }
        if (!names.empty()) {
          return make_error(ErrorKind::permanent, "the repository offers no metadataPrefix '" + m_f.prefix +
                                                      "' (it offers " + names + ")");
        }
      }
    }
    if (!m_f.set) {
      return {};
    }
    std::string token;
    for (int page = 0; page < 100; ++page) {
      auto body = fetch(oai::list_sets_url(m_f.base_url, token));
      if (!body) {
        return {};
      }
      oai::Resumption more;
      auto sets = oai::parse_sets(*body, &more);
      if (!sets) {
        return {};
      }
      for (const auto& s : *sets) {
        if (s.spec == *m_f.set) {
          return {};
        }
      }
      if (more.token.empty()) {
        return make_error(ErrorKind::permanent, "the repository lists no set '" + *m_f.set + "'");
      }
      token = more.token;
    }
    return {};
  }

  // Identify's earliestDatestamp, moved up to the oldest datestamp the
  // first page of ListIdentifiers shows when that is later: endpoints that
  // say 0001 (or 1970) would cost a baseline a window for every year since.
  // The first window stays open at its start, so a record older than the
  // probe saw is still harvested.
  void clamp_earliest() {
    oai::ListRequest q;
    q.verb = "ListIdentifiers";
    q.metadata_prefix = m_f.prefix;
    q.set = m_f.set;
    q.granularity = m_id.granularity;
    auto body = fetch(oai::list_url(m_f.base_url, q));
    if (!body) {
      return;
    }
    auto page = oai::parse_list(*body);
    if (!page || page->records.empty()) {
      return;
    }
    rs::Timestamp oldest = page->records.front().datestamp;
    for (const auto& r : page->records) {
      oldest = std::min(oldest, r.datestamp);
    }
    oldest = floor<days>(oldest);
    if (m_id.earliest_datestamp && *m_id.earliest_datestamp < oldest) {
      m_ctx.note("Identify's earliestDatestamp " + rs::format_w3c_datetime(*m_id.earliest_datestamp) +
                 " is older than any record the repository lists first: windows start at " +
                 rs::format_w3c_datetime(oldest));
      m_id.earliest_datestamp = oldest;
    }
  }

  std::string record_uri(const std::string& identifier) const {
    const std::string& t = m_ctx.src().oai.record_uri;
    if (t.empty()) {
      return oai::get_record_url(m_f.base_url, identifier, m_f.prefix);
    }
    std::string out = t;
    auto replace = [&out](const std::string& key, const std::string& value) {
      for (size_t p = out.find(key); p != std::string::npos; p = out.find(key, p + value.size())) {
        out.replace(p, key.size(), value);
      }
    };
    replace("{identifier}", percent_encode(identifier));
    replace("{prefix}", m_f.prefix);
    return out;
  }

  // A record as the entry the engine applies; its metadata as a document of
  // its own in `content`.
  rs::Entry entry_of(oai::Record& r, std::unordered_map<std::string, std::string>& content) {
    rs::Entry e;
    e.loc = record_uri(r.identifier);
    e.lastmod = r.datestamp;
    rs::Metadata md;
    md.datetime = r.datestamp;
    if (r.deleted) {
      md.change = rs::Change::deleted;
    } else {
      std::string doc = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n" + r.metadata + "\n";
      std::string().swap(r.metadata); // held once: as the content
      md.hash = {rs::HashValue{"sha-256", rs::hash_hex(rs::HashAlgorithm::sha256, doc)}};
      md.length = doc.size();
      md.type = "application/xml";
      content[e.loc] = std::move(doc);
    }
    e.md = std::move(md);
    if (!m_ctx.src().oai.record_uri.empty()) {
      rs::Link via; // the record at its origin, whatever URI it is given here
      via.rel = "via";
      via.href = oai::get_record_url(m_f.base_url, r.identifier, m_f.prefix);
      e.links.push_back(std::move(via));
    }
    for (const auto& s : r.sets) {
      rs::Link l;
      l.rel = "collection";
      l.href = oai::list_url(m_f.base_url, {"ListRecords", m_f.prefix, s, {}, {}, Granularity::day, {}});
      e.links.push_back(std::move(l));
    }
    return e;
  }

  // The content of a page's records, from the page itself.
  ContentSource inline_source(const std::unordered_map<std::string, std::string>& content) {
    return [this, &content](const std::vector<const rs::Entry*>& wanted) {
      std::vector<Result<FetchedContent>> out;
      out.reserve(wanted.size());
      for (const rs::Entry* e : wanted) {
        auto it = content.find(e->loc);
        if (it == content.end()) {
          out.emplace_back(make_error(ErrorKind::invalid_document, e->loc + ": no metadata in the record"));
          continue;
        }
        // Sealed here, published with the page's other records in one
        // file-system sync (a sync per record held a harvest to 750/s).
        auto w = m_ctx.blobs().begin();
        if (!w) {
          out.emplace_back(tl::unexpected(w.error()));
          continue;
        }
        if (auto r = w->write(it->second.data(), it->second.size()); !r) {
          out.emplace_back(tl::unexpected(r.error()));
          continue;
        }
        FetchedContent fc;
        fc.blob = w->seal();
        fc.sealed.emplace(std::move(*w));
        fc.served_from = std::string(store::k_inline_prefix) +
                         oai::get_record_url(m_f.base_url, m_identifier_of.at(e->loc), m_f.prefix);
        fc.type = "application/xml";
        out.emplace_back(std::move(fc));
      }
      m_ctx.stage_sealed(out);
      return out;
    };
  }

  // The watermark a page's batch reaches: the harvest's time does not move
  // until the harvest ends (a list is not in datestamp order); where it
  // goes on does.
  Watermark reached() const {
    Watermark w = m_w;
    w.resume = m_state.dump();
    return w;
  }

  // A page's records, a slice at a time: each slice's content is made,
  // applied and freed before the next, so that a page costs its records
  // once, not three times. Only the last slice moves where the harvest goes
  // on; a crash between slices reads the page again.
  Result<void> apply(oai::Page& page, bool baseline) {
    if (page.records.empty()) {
      return apply_slice(page.records, baseline, true);
    }
    for (size_t at = 0; at < page.records.size(); at += k_slice) {
      const size_t end = std::min(page.records.size(), at + k_slice);
      std::vector<oai::Record> slice(std::make_move_iterator(page.records.begin() + static_cast<std::ptrdiff_t>(at)),
                                     std::make_move_iterator(page.records.begin() + static_cast<std::ptrdiff_t>(end)));
      if (auto r = apply_slice(slice, baseline, end == page.records.size()); !r) {
        return r;
      }
    }
    return {};
  }

  Result<void> apply_slice(std::vector<oai::Record>& records, bool baseline, bool last) {
    std::unordered_map<std::string, std::string> content;
    m_identifier_of.clear(); // this slice's only: a harvest's would grow with it
    Watermark at = reached();
    if (!last) {
      at.resume = m_at_page;
    }
    if (baseline) {
      std::vector<rs::Entry> entries;
      for (auto& r : records) {
        if (!r.deleted) {
          rs::Entry e = entry_of(r, content);
          m_identifier_of[e.loc] = r.identifier;
          entries.push_back(std::move(e));
        }
      }
      auto r = baseline_batch(m_ctx, m_feed, entries, inline_source(content), at);
      m_ctx.add_done(records.size());
      return r;
    }
    std::vector<PendingChange> changes;
    for (auto& r : records) {
      rs::Entry e = entry_of(r, content);
      m_identifier_of[e.loc] = r.identifier;
      PendingChange c{std::move(e), r.datestamp, static_cast<int64_t>(changes.size()), true};
      c.selected = m_ctx.src().selects(c.entry.loc, std::string("application/xml"));
      c.kind_open = true; // a record is "not deleted": created or updated is what we hold's to say
      changes.push_back(std::move(c));
    }
    if (changes.empty()) {
      // Nothing on this page: only where the harvest goes on moves.
      return commit_watermark(m_ctx, m_feed, at);
    }
    Watermark w = m_w;
    auto r = change_batch(m_ctx, m_feed, m_f.feed_url, changes, w, inline_source(content),
                          [&at](Watermark& next) { next = at; });
    m_ctx.add_done(records.size());
    return r;
  }

  void warn(const std::string& url, const oai::Page& page) {
    for (const auto& w : page.warnings) {
      m_ctx.error(url, "line " + std::to_string(w.line) + (w.identifier.empty() ? "" : ", record " + w.identifier) +
                           ": " + w.reason);
    }
  }

  std::string first_page_url(bool identifiers = false) const {
    oai::ListRequest q;
    q.verb = identifiers ? "ListIdentifiers" : "ListRecords";
    q.metadata_prefix = m_f.prefix;
    q.set = m_f.set;
    q.granularity = m_id.granularity;
    q.from = m_state.from;
    q.until = m_state.until;
    return oai::list_url(m_f.base_url, q);
  }

  // Whether a window's first page says the window asked for too much: an
  // OAI-PMH error other than those that mean something else (a refusal,
  // as badArgument), or a timeout of a window longer than a day. A 5xx, a
  // refused connection or any other failure is an outage: the run fails,
  // and the next one goes on at the same window (halving on those walked
  // an honest repository in one-second windows after a short outage).
  bool too_large(const Result<oai::Page>& page) const {
    if (page) {
      for (const auto& e : page->errors) {
        if (e.code != "noRecordsMatch" && e.code != "badResumptionToken" && e.code != "cannotDisseminateFormat" &&
            e.code != "noSetHierarchy" && e.code != "badVerb") {
          return true;
        }
      }
      return false;
    }
    const std::string& m = page.error().message;
    const bool timed_out = m.find("timed out") != std::string::npos || m.find("no data in time") != std::string::npos;
    const rs::Timestamp from = m_state.from.value_or(m_id.earliest_datestamp.value_or(rs::Timestamp{}));
    return timed_out && m_state.until.value_or(m_harvest_until) - from > hours(24);
  }

  // The shortest window a refusal halves to: an hour (a day at day
  // granularity), however often the repository refuses.
  seconds floor_span() const { return m_id.granularity == Granularity::day ? seconds(86400) : seconds(3600); }

  // Halves the window under way after the repository refused its first
  // page as too large; false when it cannot be halved further.
  bool halve() {
    // An open first window starts at what Identify says, not at a clamp:
    // nothing the repository holds is older.
    const rs::Timestamp from = m_state.from.value_or(m_claimed_earliest.value_or(rs::Timestamp{}));
    const rs::Timestamp end = m_state.until.value_or(m_harvest_until);
    const auto span = duration_cast<seconds>(end - from);
    if (span / 2 < floor_span()) {
      return false;
    }
    m_state.from = from;
    m_state.span_seconds = (span / 2).count();
    m_state.until = from + seconds(m_state.span_seconds);
    m_ctx.note("the repository refused a window as too large: harvesting " + rs::format_w3c_datetime(from) +
               " to " + rs::format_w3c_datetime(*m_state.until) + " first");
    return true;
  }

  // After a window was walked whole: the next may be twice as long again,
  // up to the span the harvest began with, so that one refusal does not
  // cost the rest of the harvest.
  void grow() {
    if (m_state.span_seconds > 0 && m_state.span_seconds < m_initial_span) {
      m_state.span_seconds = std::min<int64_t>(m_state.span_seconds * 2, m_initial_span);
    }
  }

  Result<void> harvest(bool baseline) {
    std::optional<RunContext::BaselineScope> counted;
    if (baseline) {
      counted.emplace(m_ctx);
    }
    return walk(false, [&](oai::Page& page) { return apply(page, baseline); });
  }

  // Every page of the list (ListRecords, or ListIdentifiers with
  // `identifiers`) from where m_state says, window by window, each handed
  // to `on_page`; m_state says where the walk goes on after each.
  Result<void> walk(bool identifiers, const std::function<Result<void>(oai::Page&)>& on_page) {
    const std::string verb = identifiers ? "ListIdentifiers" : "ListRecords";
    m_harvest_until = now_ts();
    while (true) {
      std::string url = m_state.next.empty() ? first_page_url(identifiers) : m_state.next;
      const bool first_of_window = m_state.next.empty();
      m_bounds.start_list();
      while (!url.empty()) {
        if (m_ctx.cancelled()) {
          return make_error(ErrorKind::transient, "stopped");
        }
        Result<oai::Page> page = [&]() -> Result<oai::Page> {
          auto body = fetch(url);
          if (!body) {
            return tl::unexpected(body.error());
          }
          return oai::parse_list(*body); // the page's bytes are freed here, before its records are applied
        }();
        if (page && page->has_error("badResumptionToken") && !m_state.next.empty()) {
          m_ctx.note("the repository no longer honours the resumption token: the window is harvested again from "
                     "its start");
          m_state.next.clear();
          m_bounds.start_list();
          url = first_page_url(identifiers);
          continue;
        }
        if (first_of_window && m_state.next.empty() && too_large(page) && halve()) {
          url = first_page_url(identifiers);
          continue;
        }
        if (!page) {
          return make_error(page.error().kind, url + ": " + page.error().message);
        }
        if (!page->errors.empty() && !page->has_error("noRecordsMatch")) {
          return make_error(ErrorKind::permanent, url + ": the repository answered " + page->errors[0].code +
                                                      (page->errors[0].message.empty() ? "" : ": " +
                                                                                                  page->errors[0].message));
        }
        if (auto stop = m_bounds.check(*page)) {
          return make_error(ErrorKind::permanent, url + ": " + *stop);
        }
        warn(url, *page);
        if (!m_state.started) {
          m_state.started = page->response_date.value_or(now_ts());
        }
        m_at_page = m_state.dump(); // where the harvest goes on until this page is applied whole
        m_state.next = page->last() ? std::string()
                                    : oai::list_url(m_f.base_url, {verb, m_f.prefix, {}, {}, {}, m_id.granularity,
                                                                   page->resumption.token});
        m_state.expires = page->last() ? std::nullopt : page->resumption.expires;
        m_ctx.add_total(page->records.size());
        if (auto r = on_page(*page); !r) {
          return r;
        }
        m_ctx.progress(url);
        url = m_state.next;
        if (!url.empty() && m_bounds.run_spent()) {
          return make_error(ErrorKind::transient, "read " + std::to_string(m_bounds.run_pages()) +
                                                      " pages, a run's share: the next run goes on from the page "
                                                      "after the last one applied");
        }
      }
      grow();
      // The window is done; the next one, if the harvest was split.
      if (!m_state.until || *m_state.until >= m_harvest_until) {
        return {};
      }
      m_state.from = m_state.until;
      m_state.until = std::min(*m_state.from + seconds(m_state.span_seconds), m_harvest_until);
      if (*m_state.until >= m_harvest_until) {
        m_state.until.reset(); // the last window is open-ended
      }
      if (!identifiers) {
        // Where the harvest goes on, should it stop before the next
        // window's first page is applied.
        if (auto r = move_watermark(m_ctx, m_feed, [this](Watermark& w) { w.resume = m_state.dump(); }); !r) {
          return r;
        }
      }
    }
  }

  Result<void> finish(bool baseline) {
    if (auto r = m_ctx.drain(); !r) {
      return r;
    }
    const rs::Timestamp started = m_state.started.value_or(now_ts());
    if (baseline) {
      // Everything listed was seen: what we hold beyond it is gone (through
      // the mass-deletion guard), unless pages were seen by another run.
      auto r = close_baseline(m_ctx, m_feed, started, std::nullopt, !m_state.resumed_baseline);
      if (m_state.resumed_baseline) {
        m_ctx.note("a resumed baseline deletes nothing it did not list this run: the audit (ListIdentifiers) will");
      }
      return r;
    }
    return move_watermark(m_ctx, m_feed, [&](Watermark& w) {
      w.resume.clear();
      w.change_list_url = m_f.feed_url;
      w.last_time = std::min(started, now_ts());
      w.last_uri.clear();
      w.last_position = -1;
    });
  }

  // Every identifier the repository lists: what we hold beyond them is gone
  // (a repository whose deletedRecord is "no" or "transient" never says),
  // through the mass-deletion guard.
  Result<void> audit() {
    m_state = Resume{};
    auto walked = walk(true, [this](oai::Page& page) -> Result<void> {
      std::vector<std::string> seen;
      for (const auto& r : page.records) {
        if (!r.deleted) {
          seen.push_back(record_uri(r.identifier));
        }
      }
      for (const auto& w : page.warnings) {
        if (!w.identifier.empty()) {
          seen.push_back(record_uri(w.identifier)); // listed, with a bad value: kept as held
        }
      }
      m_ctx.report().audit.in_sync += seen.size();
      return commit_seen(m_ctx, m_feed, std::move(seen));
    });
    if (!walked) {
      return walked;
    }
    if (auto r = m_ctx.drain(); !r) {
      return r;
    }
    auto wm = m_ctx.settled_watermark(m_feed);
    if (!wm) {
      return tl::unexpected(wm.error());
    }
    auto deleted = delete_unseen(m_ctx, m_feed, *wm, "the repository no longer lists");
    if (!deleted) {
      return tl::unexpected(deleted.error());
    }
    m_ctx.report().audit.extra += deleted->unseen;
    return {};
  }

  RunContext& m_ctx;
  int64_t m_feed;
  const OaiFeed& m_f;
  oai::Identify m_id;
  Watermark m_w;
  Resume m_state;
  rs::Timestamp m_harvest_until{};
  std::unordered_map<std::string, std::string> m_identifier_of; // record URI -> identifier
  oai::ListBounds m_bounds;
  int64_t m_initial_span = 0; // seconds: what a halved window grows back to
  std::string m_at_page;      // Resume at the page under way, as dumped
  std::optional<rs::Timestamp> m_claimed_earliest; // Identify's, before clamp_earliest
};

} // namespace

std::vector<OaiFeed> oai_feeds(const SourceConfig& src) {
  std::vector<OaiFeed> out;
  std::vector<std::optional<std::string>> sets;
  for (const auto& s : src.oai.sets) {
    sets.emplace_back(s);
  }
  if (sets.empty()) {
    sets.emplace_back(std::nullopt);
  }
  for (const auto& prefix : src.oai.metadata_prefixes) {
    for (const auto& set : sets) {
      OaiFeed f;
      f.base_url = src.url;
      f.prefix = prefix;
      f.set = set;
      oai::ListRequest q;
      q.metadata_prefix = prefix;
      q.set = set;
      f.feed_url = oai::list_url(src.url, q);
      out.push_back(std::move(f));
    }
  }
  return out;
}

Result<void> sync_oai_feed(RunContext& ctx, int64_t feed, const OaiFeed& f) {
  // No retry_failed here: a record's content comes with its page, and its
  // loc (a GetRecord URL) answers with an OAI-PMH envelope, not the record.
  Harvest h(ctx, feed, f);
  return h.run();
}

} // namespace tributary::sync
