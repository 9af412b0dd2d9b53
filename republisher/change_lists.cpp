#include "republisher/change_lists.h"

#include <algorithm>

namespace tributary::pub {

namespace {

// A part's document without its entries, cut where they go: its header (the
// root, rs:ln up and index, rs:md from and, once closed, until) and the
// root's end.
struct Frame {
  std::string head;
  std::string tail;
};

Frame part_frame(const UrlScheme& urls, const PublishedSet& set, rs::Timestamp from,
                 std::optional<rs::Timestamp> until) {
  rs::Document d = capability_document("changelist");
  d.header.md->from = from;
  d.header.md->until = until;
  d.header.links.push_back(link("up", urls.capability_list(set.name)));
  d.header.links.push_back(link("index", urls.change_list_index(set.name)));
  std::string whole = rs::write_document(d); // no entries: the header, then the root's end
  const size_t cut = whole.rfind("</");
  return Frame{whole.substr(0, cut), whole.substr(cut)};
}

// Starts `open` again: an empty part after change `after_seq`.
void restart(OpenPart& open, const PublishedSet& set, size_t part_size, int64_t after_seq) {
  open.feeds = set.feeds;
  open.part_size = part_size;
  open.after_seq = after_seq;
  open.last_seq = after_seq;
  open.from.reset();
  open.last_time.reset();
  open.entries = 0;
  open.head_size = 0;
  open.text = rs::GrowingText(k_transient_gzip_level);
  open.gzipped.clear();
  open.sha256_hex.clear();
}

// `closed` made for `set` and `part_size` (reset when it was for others),
// with the parts `compaction` covers dropped.
void prepare_closed(ClosedParts& closed, const PublishedSet& set, size_t part_size,
                    const store::Compaction* compaction) {
  if (closed.feeds != set.feeds || closed.part_size != part_size) {
    closed = ClosedParts{};
    closed.feeds = set.feeds;
    closed.part_size = part_size;
  }
  if (compaction && compaction->feeds == set.feeds && compaction->part_size == part_size &&
      compaction->parts > closed.compacted) {
    // The parts it covers go; those after it stay as they were (the same
    // changes: compaction cuts between parts).
    const size_t drop = compaction->parts - closed.compacted;
    if (drop <= closed.parts.size() && closed.parts[drop - 1].last_seq == compaction->last_seq) {
      closed.parts.erase(closed.parts.begin(), closed.parts.begin() + static_cast<std::ptrdiff_t>(drop));
    } else {
      closed.parts.clear(); // not known here yet: read from where it ended
    }
    closed.compacted = compaction->parts;
    closed.compacted_seq = compaction->last_seq;
    closed.compacted_until = compaction->until;
  }
}

struct PartRange {
  std::string url;
  rs::Timestamp from;
  std::optional<rs::Timestamp> until;
};

// The open part's document (possibly empty: also after a part that filled
// up exactly, the index always ends with an open list), its range added to
// `ranges`. Empty with no part before it, its `from` is now, and it is
// rendered whole each time.
rs::WrittenPart open_document(const UrlScheme& urls, const PublishedSet& set, OpenPart& open,
                              std::optional<rs::Timestamp> last_time, std::vector<PartRange>& ranges) {
  const std::string url = urls.change_list(set.name);
  if (!open.from) {
    const rs::Timestamp from = last_time ? *last_time : now();
    const Frame f = part_frame(urls, set, from, std::nullopt);
    open.gzipped.clear();
    open.sha256_hex.clear();
    ranges.push_back(PartRange{url, from, std::nullopt});
    return rs::WrittenPart{url, f.head + f.tail, 0, false};
  }
  const Frame f = part_frame(urls, set, *open.from, std::nullopt);
  auto v = open.text.with_tail(f.tail);
  open.gzipped = std::move(v.gzipped);
  open.sha256_hex = std::move(v.sha256_hex);
  ranges.push_back(PartRange{url, *open.from, std::nullopt});
  return rs::WrittenPart{url, std::move(v.text), open.entries, false};
}

rs::WrittenPart index_document(const UrlScheme& urls, const PublishedSet& set, const std::vector<PartRange>& ranges) {
  rs::Document index = capability_document("changelist");
  index.header.root = rs::RootElement::sitemapindex;
  index.header.md->from = ranges.front().from;
  index.header.links.push_back(link("up", urls.capability_list(set.name)));
  for (const auto& r : ranges) {
    index.entries.push_back(list_entry(ArchivedList{r.url, r.from, r.until, {}, {}}));
  }
  return rs::WrittenPart{urls.change_list_index(set.name), rs::write_document(index), index.entries.size(), true};
}

} // namespace

Result<std::vector<rs::WrittenPart>> render_change_list(store::StoreReader& reader, const UrlScheme& urls,
                                                        const PublishedSet& set, size_t part_size,
                                                        ClosedParts* closed,
                                                        const std::function<void(rs::WrittenPart&&)>& closed_sink,
                                                        const store::Compaction* compaction, OpenPart* open) {
  part_size = std::max<size_t>(1, std::min<size_t>(part_size, rs::k_max_entries));
  ClosedParts scratch;
  if (!closed) {
    closed = &scratch;
  }
  OpenPart scratch_open;
  if (!open) {
    open = &scratch_open;
  }
  prepare_closed(*closed, set, part_size, compaction);
  std::vector<rs::WrittenPart> out;
  std::vector<PartRange> ranges;
  std::optional<rs::Timestamp> last_time = closed->compacted_until;
  std::optional<rs::Timestamp> part_from = closed->compacted_until;
  int64_t after = closed->compacted_seq;
  for (const auto& p : closed->parts) {
    ranges.push_back(PartRange{p.url, p.from, p.until});
    last_time = p.until;
    part_from = p.until;
    after = p.last_seq;
  }
  // The open part goes on from where it was left, if it is this one.
  if (open->after_seq == after && open->feeds == set.feeds && open->part_size == part_size) {
    if (open->entries > 0) {
      last_time = open->last_time;
      after = open->last_seq;
    }
  } else {
    restart(*open, set, part_size, after);
  }

  ClosedParts& known = *closed;
  // Its header, once its `from` is known: the last part's `until`, or its
  // first entry's time.
  auto begin_open = [&](rs::Timestamp from) {
    if (!open->from) {
      open->from = from;
      const Frame f = part_frame(urls, set, from, std::nullopt);
      open->text.append(f.head);
      open->head_size = f.head.size();
    }
  };
  std::string entry_xml;
  auto close_open = [&] {
    const size_t n = closed->compacted + ranges.size() + 1;
    const rs::Timestamp from = *open->from;
    const Frame f = part_frame(urls, set, from, open->last_time);
    const std::string& text = open->text.text();
    std::string xml;
    xml.reserve(f.head.size() + text.size() - open->head_size + f.tail.size());
    xml.append(f.head).append(text, open->head_size, std::string::npos).append(f.tail);
    PartRange range{urls.change_list_part(set.name, n), from, open->last_time};
    rs::WrittenPart written{range.url, std::move(xml), open->entries, false};
    if (closed_sink) {
      closed_sink(std::move(written));
    } else {
      out.push_back(std::move(written));
    }
    known.parts.push_back(ClosedParts::Part{n, range.url, from, *open->last_time, open->last_seq});
    ranges.push_back(std::move(range));
    const rs::Timestamp until = *open->last_time;
    restart(*open, set, part_size, open->last_seq);
    begin_open(until); // the next part starts where this one ended
  };
  if (part_from) {
    begin_open(*part_from);
  }

  const auto held = held_in(reader, set);
  for (;;) {
    auto page = reader.changes(set.feeds, after, 10000);
    if (!page) {
      // What this rendering added to the open part stays: it is the store's
      // (the next rendering goes on after it).
      return tl::unexpected(page.error());
    }
    for (const auto& c : *page) {
      // Ours, strictly increasing (so unique per URI): recorded time, nudged
      // past the previous entry when the clock did not move.
      rs::Entry e = change_entry(urls, set.name, c, last_time, held);
      const rs::Timestamp t = *e.md->datetime;
      begin_open(t);
      entry_xml.clear();
      rs::append_entry(entry_xml, e, rs::RootElement::urlset);
      open->text.append(entry_xml);
      ++open->entries;
      open->last_time = t;
      open->last_seq = c.seq;
      last_time = t;
      if (open->entries == part_size) {
        close_open();
      }
    }
    if (page->size() < 10000) {
      break;
    }
    after = page->back().seq;
  }
  out.push_back(open_document(urls, set, *open, last_time, ranges));
  out.push_back(index_document(urls, set, ranges));
  return out;
}

} // namespace tributary::pub
