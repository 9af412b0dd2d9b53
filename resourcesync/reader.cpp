#include "resourcesync/reader.h"

#include "resourcesync/reader_impl.h"

#include "common/text.h"
#include "common/url_resolve.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs {

using namespace reading;

// The document's structure as the XML scanner reports it: the root, the
// header, each entry and its fields.

void Reader::Impl::deliver_header() {
  if (header_delivered) {
    return;
  }
  header_delivered = true;
  if (!header.md) {
    // A sitemaps.org document (DSpace, InvenioRDM, Dataverse, every
    // sitemap generator): what it lists is a Resource List's content.
    header.md = Metadata{};
    header.md->capability = std::string(to_string(Capability::resourcelist));
    header.plain_sitemap = true;
    diag(Severity::warning, root_line,
         std::string("a plain Sitemap (no <rs:md>): read as a Resource List") +
             (header.root == RootElement::sitemapindex ? " Index" : ""));
  }
  for (auto& l : header.links) {
    resolve(l.href, "<rs:ln rel=\"" + l.rel + "\"> href", root_line);
  }
  if (options.validate) {
    validator.header(header, root_line);
  }
  handler.on_header(header);
}

namespace {

// ns is k (k_sitemap_ns or k_rs_ns): the scanner reports those as these
// very views (Scanner::intern), so the pointers settle it without
// comparing 43 bytes, element after element.
bool is_ns(std::string_view ns, std::string_view k) { return ns.data() == k.data() || same(ns, k); }

} // namespace

// ---- the scanner's events -------------------------------------------------
void Reader::Impl::start_element(std::string_view name, std::string_view prefix, std::string_view ns,
                                 std::span<const xml::Namespace> declared, std::span<const Attr> attrs) {
  if (stack.size() >= options.max_depth) {
    stop("elements nested deeper than " + std::to_string(options.max_depth));
    return;
  }
  const Ctx parent = stack.empty() ? Ctx::none : stack.back();
  switch (parent) {
  case Ctx::none:
    start_root(name, ns, declared);
    return;
  case Ctx::root:
    start_in_root(name, prefix, ns, attrs);
    return;
  case Ctx::entry:
    start_in_entry(name, prefix, ns, attrs);
    return;
  case Ctx::text:
    error("unexpected element <" + std::string(name) + "> inside a text element");
    stack.push_back(Ctx::skip);
    return;
  case Ctx::skip:
    stack.push_back(Ctx::skip);
    return;
  case Ctx::extension:
    ext_stack.push_back(values.make_node(name, prefix, ns, attrs));
    stack.push_back(Ctx::extension);
    return;
  }
}

void Reader::Impl::characters(std::string_view chars) {
  if (stack.empty()) {
    return;
  }
  Ctx c = stack.back();
  if (c != Ctx::text && c != Ctx::extension) {
    return;
  }
  std::string& target = c == Ctx::text ? text : ext_stack.back().text;
  if (target.size() + chars.size() > options.max_value_bytes) {
    stop("element text is over the limit of " + std::to_string(options.max_value_bytes) + " bytes");
    return;
  }
  target.append(chars);
}

void Reader::Impl::doctype(std::string_view name) {
  stop("DOCTYPE declaration <!DOCTYPE " + std::string(name) +
       "> is not allowed (entities are never expanded)");
}

void Reader::Impl::xml_error(uint64_t line_no, std::string message, bool fatal) {
  if (summary.stopped) {
    return;
  }
  error_at(line_no, "not well-formed XML: " + message);
  if (fatal) {
    summary.stopped = true;
  }
}

void Reader::Impl::start_root(std::string_view name, std::string_view ns,
                              std::span<const xml::Namespace> declared) {
  root_seen = true;
  root_line = line();
  if (!is_ns(ns, k_sitemap_ns) || (!same(name, "urlset") && !same(name, "sitemapindex"))) {
    stop("root element <" + std::string(name) + "> in namespace '" + std::string(ns) +
         "' is not a Sitemap <urlset> or <sitemapindex> (" + std::string(k_sitemap_ns) + ")");
    return;
  }
  header.root = same(name, "urlset") ? RootElement::urlset : RootElement::sitemapindex;
  for (const auto& d : declared) {
    if (d.uri != k_sitemap_ns && d.uri != k_rs_ns) {
      header.namespaces.emplace_back(std::string(d.prefix), std::string(d.uri));
    }
  }
  stack.push_back(Ctx::root);
}

void Reader::Impl::start_in_root(std::string_view name, std::string_view prefix, std::string_view ns,
                                 std::span<const Attr> attrs) {
  const bool late = header_delivered;
  if (is_ns(ns, k_rs_ns) && (same(name, "md") || same(name, "ln"))) {
    if (late) {
      warning("<rs:" + std::string(name) + "> of the document comes after its entries");
    }
    if (same(name, "md")) {
      if (header.md && !header.plain_sitemap) {
        error("the document has more than one <rs:md>");
      } else {
        values.parse_md(attrs, header.md.emplace());
        header.plain_sitemap = false;
      }
    } else if (auto ln = values.parse_ln(attrs)) {
      header.links.push_back(std::move(*ln));
    }
    stack.push_back(Ctx::skip);
    return;
  }
  if (is_ns(ns, k_sitemap_ns) && (same(name, "url") || same(name, "sitemap"))) {
    const bool expected =
        same(name, "url") == (header.root == RootElement::urlset);
    if (!expected) {
      error("<" + std::string(name) + "> inside <" + std::string(to_string(header.root)) + ">");
    }
    deliver_header();
    // `entry` is empty: end_entry() emptied it (moving it out is not
    // enough to say so), and nothing else fills it.
    entry_line = line();
    entry_md_seen = false;
    entry_errors_at_start = summary.errors;
    dropped_at_start = summary.dropped_values;
    entry_fault.clear();
    stack.push_back(Ctx::entry);
    return;
  }
  if (late) {
    warning("element <" + std::string(name) + "> of the document comes after its entries");
  }
  ext_stack.push_back(values.make_node(name, prefix, ns, attrs));
  stack.push_back(Ctx::extension);
}

void Reader::Impl::start_in_entry(std::string_view name, std::string_view prefix, std::string_view ns,
                                  std::span<const Attr> attrs) {
  if (is_ns(ns, k_sitemap_ns)) {
    if (same(name, "loc") || same(name, "lastmod") || same(name, "changefreq") || same(name, "priority")) {
      text_field = same(name, "loc")       ? TextField::loc
                   : same(name, "lastmod") ? TextField::lastmod
                   : same(name, "changefreq") ? TextField::changefreq
                                          : TextField::priority;
      text.clear();
      stack.push_back(Ctx::text);
      return;
    }
  } else if (is_ns(ns, k_rs_ns)) {
    if (same(name, "md")) {
      if (entry_md_seen) {
        value_error("an entry has more than one <rs:md> (it is not repeatable; the second is ignored)");
      } else {
        values.parse_md(attrs, entry.md.emplace());
        entry_md_seen = true;
      }
      stack.push_back(Ctx::skip);
      return;
    }
    if (same(name, "ln")) {
      if (auto ln = values.parse_ln(attrs)) {
        entry.links.push_back(std::move(*ln));
      }
      stack.push_back(Ctx::skip);
      return;
    }
  }
  ext_stack.push_back(values.make_node(name, prefix, ns, attrs));
  stack.push_back(Ctx::extension);
}

void Reader::Impl::end_element() {
  if (stack.empty()) {
    return;
  }
  const Ctx c = stack.back();
  stack.pop_back();
  switch (c) {
  case Ctx::text:
    end_text();
    return;
  case Ctx::entry:
    end_entry();
    return;
  case Ctx::extension: {
    XmlNode node = std::move(ext_stack.back());
    ext_stack.pop_back();
    if (!ext_stack.empty()) {
      ext_stack.back().children.push_back(std::move(node));
    } else if (stack.back() == Ctx::entry) {
      entry.extensions.push_back(std::move(node));
    } else {
      header.extensions.push_back(std::move(node));
    }
    return;
  }
  case Ctx::root:
    deliver_header();
    return;
  case Ctx::none:
  case Ctx::skip:
    return;
  }
}

std::string_view Reader::Impl::trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

void Reader::Impl::end_text() {
  // Sitemap values are whitespace-insensitive at their ends (many
  // generators pretty-print `<loc>` across lines).
  std::string_view v = trim(text);
  switch (text_field) {
  case TextField::loc:
    if (!entry.loc.empty()) {
      error("an entry has more than one <loc>");
    }
    if (v.size() > options.max_uri_bytes) {
      error("<loc> '" + std::string(v.substr(0, 100)) + "...' is " + std::to_string(v.size()) +
            " bytes, over the limit of " + std::to_string(options.max_uri_bytes));
      return;
    }
    entry.loc = std::string(v);
    return;
  case TextField::lastmod:
    entry.lastmod = values.datetime(v, "<lastmod>");
    entry.lastmod_date_only = entry.lastmod && is_date_only(v);
    return;
  case TextField::changefreq:
    entry.changefreq = std::string(v);
    return;
  case TextField::priority:
    entry.priority = std::string(v);
    return;
  }
}

// A relative reference resolved against the document's URL (py-resync's
// own test data writes `res/3`); the host policy then applies to the
// result as to any URL. Without a base it stays as it is.
void Reader::Impl::resolve(std::string& ref, std::string_view what, uint64_t line_no) {
  if (ref.empty() || has_uri_scheme(ref) || options.base_url.empty()) {
    return;
  }
  auto abs = resolve_reference(options.base_url, ref);
  if (!abs) {
    return; // the validator reports it
  }
  diag(Severity::warning, line_no,
       std::string(what) + " " + ValueReader::quote(ref) + " is relative: read as " + ValueReader::quote(*abs) +
           " (resolved against the document's URL)");
  ref = std::move(*abs);
}

// A change without a time of its own happened, as far as the document
// tells, no earlier than the change before it: it takes that change's
// time (so that the document stays in order and a Destination's
// watermark neither skips nor repeats it), else the document's `from`,
// else its `until`, else the time the document was read.
void Reader::Impl::infer_change_time() {
  const auto cap = header.capability();
  if (!cap || !is_change_capability(*cap) || *cap == Capability::changedump ||
      header.root != RootElement::urlset) {
    return;
  }
  if (auto t = entry.change_time()) {
    if (!last_change || *t > *last_change) {
      last_change = t;
    }
    return;
  }
  std::optional<Timestamp> t = last_change;
  if (!t && header.md) {
    t = header.md->from ? header.md->from : header.md->until;
  }
  if (!t) {
    t = options.read_time ? *options.read_time
                          : std::chrono::time_point_cast<std::chrono::microseconds>(std::chrono::system_clock::now());
  }
  if (!entry.md) {
    entry.md.emplace();
  }
  entry.md->datetime = t;
  entry.time_inferred = true;
  last_change = t;
}

void Reader::Impl::end_entry() {
  ++summary.entries;
  resolve(entry.loc, "<loc>", entry_line);
  for (auto& l : entry.links) {
    resolve(l.href, "<rs:ln rel=\"" + l.rel + "\"> href", entry_line);
  }
  // Errors of this entry that did not only cost a value.
  const uint64_t own_errors =
      (summary.errors - entry_errors_at_start) - (summary.dropped_values - dropped_at_start);
  std::string fault = std::move(entry_fault);
  entry_fault.clear();
  uint64_t rule_errors = 0;
  if (options.validate) {
    auto check = validator.entry(entry, entry_line);
    rule_errors = check.faults;
    if (fault.empty()) {
      fault = std::move(check.loc_fault);
    }
  }
  summary.entry_errors += own_errors + rule_errors;
  infer_change_time();
  if (!fault.empty()) {
    // Only an unusable <loc> (or XML broken inside the entry) costs the
    // entry; the document stays usable.
    ++summary.rejected_entries;
    handler.on_rejected_entry(std::move(entry), entry_line, fault);
  } else {
    handler.on_entry(std::move(entry), entry_line);
  }
  entry = Entry{};
}


void Reader::Impl::feed_parser(const char* data, size_t size, bool terminate) {
  try {
    scanner.feed(std::string_view(data, size));
    if (terminate) {
      scanner.finish();
    }
  } catch (...) {
    exception = std::current_exception();
    scanner.stop();
  }
}

Reader::Reader(DocumentHandler& handler, ReaderOptions options)
    : m_impl(std::make_unique<Impl>(handler, options)) {}

Reader::~Reader() = default;

bool Reader::feed(const void* data, size_t size) {
  Impl& r = *m_impl;
  if (r.summary.stopped) {
    return false;
  }
  const char* p = static_cast<const char*>(data);
  // Large buffers in pieces (the input decoder's UTF-8 repairs are copies).
  while (size > 0 && !r.summary.stopped && !r.exception) {
    size_t n = std::min(size, k_chunk * 16);
    r.input.push(p, n, false);
    p += n;
    size -= n;
  }
  if (r.exception) {
    std::rethrow_exception(r.exception);
  }
  return !r.summary.stopped;
}

ReadSummary Reader::finish() {
  Impl& r = *m_impl;
  if (!r.summary.stopped && !r.input.any()) {
    r.stop("document is empty");
  }
  if (!r.summary.stopped) {
    r.input.push("", 0, true);
  }
  if (r.exception) {
    std::rethrow_exception(r.exception);
  }
  r.summary.bytes = r.input.bytes();
  r.summary.gzip = r.input.gzip();
  r.summary.compressed_bytes = r.input.compressed_bytes();
  if (r.input.bad_utf8() > 0 && !r.summary.stopped) {
    // Once, at the end (where the parser was when the bytes came depends
    // on how the input was cut); a document that stopped has its error.
    r.diag(Severity::error, r.line(),
           "not UTF-8: " + std::to_string(r.input.bad_utf8()) + " byte(s) that are not, the first at byte " +
               std::to_string(r.input.first_bad_utf8()) + " (Sitemap documents are UTF-8)");
  }
  if (!r.root_seen && !r.summary.stopped) {
    r.stop(r.summary.bytes == 0 ? "document is empty" : "document has no root element");
  }
  if (r.root_seen && !r.summary.stopped && r.options.validate) {
    r.validator.finish(r.summary.bytes);
    r.summary.out_of_order = r.validator.out_of_order();
  }
  if (r.root_seen) {
    r.summary.header = r.header;
  }
  return std::move(r.summary);
}

ReadSummary read_document(std::string_view bytes, DocumentHandler& handler,
                          const ReaderOptions& options) {
  Reader reader(handler, options);
  reader.feed(bytes);
  return reader.finish();
}

ReadSummary read_document(std::istream& in, DocumentHandler& handler, const ReaderOptions& options) {
  Reader reader(handler, options);
  std::vector<char> buf(k_chunk);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    auto n = in.gcount();
    if (n <= 0) {
      break;
    }
    if (!reader.feed(buf.data(), static_cast<size_t>(n))) {
      break;
    }
  }
  return reader.finish();
}

namespace {

class Collector : public DocumentHandler {
public:
  Collector(Document& doc, std::vector<Entry>& rejected) : m_doc(doc), m_rejected(rejected) {}
  void on_header(const DocumentHeader& h) override { m_doc.header = h; }
  void on_entry(Entry&& e, uint64_t) override { m_doc.entries.push_back(std::move(e)); }
  void on_rejected_entry(Entry&& e, uint64_t, const std::string&) override { m_rejected.push_back(std::move(e)); }

private:
  Document& m_doc;
  std::vector<Entry>& m_rejected;
};

} // namespace

ParsedDocument parse_document(std::string_view bytes, const ReaderOptions& options) {
  ParsedDocument out;
  Collector c(out.document, out.rejected);
  out.summary = read_document(bytes, c, options);
  if (out.summary.header) {
    out.document.header = *out.summary.header;
  }
  return out;
}

} // namespace tributary::rs
