#include "resourcesync/reader.h"

#include "resourcesync/validator.h"

#include "common/url_resolve.h"

#include <libxml/parser.h>
#include <libxml/parserInternals.h>
#include <libxml/SAX2.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <exception>
#include <mutex>

namespace tributary::rs {

namespace {

constexpr size_t k_chunk = 64 * 1024;

std::string_view sv(const xmlChar* s) {
  return s ? std::string_view(reinterpret_cast<const char*>(s)) : std::string_view();
}

// libxml2 hands attributes as (localname, prefix, URI, value, value_end).
struct Attr {
  std::string_view name;
  std::string_view prefix;
  std::string_view ns;
  std::string_view value;
};

enum class Ctx {
  none,      // before the root
  root,      // directly inside urlset/sitemapindex
  entry,     // inside url/sitemap
  text,      // inside loc/lastmod/changefreq/priority
  skip,      // inside an element already reported, ignored
  extension, // inside an unknown element being captured
};

enum class TextField { loc, lastmod, changefreq, priority };

// libxml2 reports some errors (an input that does not decode in its
// declared encoding) through its generic handler, which prints to stderr:
// upstream bytes must not write to our log. Every error that matters is
// seen through the parser's state (see Impl::check_parser).
void silent(void*, const char*, ...) {}

void init_libxml_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    xmlInitParser();
    xmlThrDefSetGenericErrorFunc(nullptr, silent); // threads started from now on
  });
  thread_local bool quiet = false; // and this one (the setting is per thread)
  if (!quiet) {
    xmlSetGenericErrorFunc(nullptr, silent);
    quiet = true;
  }
}

} // namespace

struct Reader::Impl {
  DocumentHandler& handler;
  ReaderOptions options;
  ReadSummary summary;
  Validator validator;

  xmlSAXHandler sax{};
  xmlParserCtxtPtr ctxt = nullptr;
  std::string pending; // bytes buffered until the gzip magic / encoding can be seen
  std::string utf8_carry;  // a UTF-8 sequence cut by the end of the last piece (parse)
  uint64_t utf8_pos = 0;   // offset of utf8_carry (or of the next piece) in the document
  uint64_t utf8_bad = 0;   // bytes that were not UTF-8, replaced
  uint64_t utf8_first = 0; // the first one's offset

  bool decided = false;
  z_stream zs{};
  bool zs_open = false;
  bool gzip_member_done = false;

  std::vector<Ctx> stack;
  DocumentHeader header;
  uint64_t root_line = 0;
  bool header_delivered = false;
  bool root_seen = false;
  Entry entry;
  uint64_t entry_line = 0;
  bool entry_md_seen = false;
  uint64_t entry_errors_at_start = 0;  // summary.errors when the entry began
  uint64_t dropped_at_start = 0;       // summary.dropped_values then
  std::string entry_fault;             // what rejects the open entry: its loc, or broken XML in it
  std::optional<Timestamp> last_change; // the latest change time read so far
  TextField text_field = TextField::loc;
  std::string text;
  bool text_too_long = false;
  std::vector<XmlNode> ext_stack;
  std::exception_ptr exception;

  Impl(DocumentHandler& h, ReaderOptions o)
      : handler(h), options(o),
        validator([this](Severity s, uint64_t line, std::string msg) {
          diag(s, line, std::move(msg));
        }) {
    sax.initialized = XML_SAX2_MAGIC;
    sax.startElementNs = &Impl::on_start;
    sax.endElementNs = &Impl::on_end;
    sax.characters = &Impl::on_chars;
    sax.cdataBlock = &Impl::on_chars;
    sax.internalSubset = &Impl::on_doctype;
    sax.externalSubset = &Impl::on_doctype;
    sax.entityDecl = &Impl::on_entity_decl;
    sax.serror = &Impl::on_error;
  }

  ~Impl() {
    if (ctxt) {
      xmlFreeParserCtxt(ctxt);
    }
    if (zs_open) {
      inflateEnd(&zs);
    }
  }

  uint64_t line() const { return ctxt ? static_cast<uint64_t>(xmlSAX2GetLineNumber(ctxt)) : 0; }

  void diag(Severity s, uint64_t line_no, std::string msg) {
    if (s == Severity::error) {
      ++summary.errors;
    } else {
      ++summary.warnings;
    }
    if (summary.diagnostics.size() >= options.max_diagnostics) {
      ++summary.suppressed_diagnostics;
      return;
    }
    summary.diagnostics.push_back(Diagnostic{s, line_no, std::move(msg)});
  }
  void error(std::string msg) { error_at(line(), std::move(msg)); }
  // An error inside an entry is the entry's (its first one, the reason it
  // is rejected for), whoever found it: our checks or libxml2 (a namespace
  // error inside a <url> once rejected it without a reason, found by
  // fuzzing).
  void error_at(uint64_t line_no, std::string msg) {
    if (!stack.empty() && entry_fault.empty() &&
        std::find(stack.begin(), stack.end(), Ctx::entry) != stack.end()) {
      entry_fault = msg;
    }
    diag(Severity::error, line_no, std::move(msg));
  }
  void warning(std::string msg) { diag(Severity::warning, line(), std::move(msg)); }
  // A value that cannot be used: it is dropped, and costs nothing else.
  void value_error(std::string msg) {
    ++summary.dropped_values;
    diag(Severity::error, line(), std::move(msg));
  }

  // Stops reading for good: the rest of the input is ignored.
  void stop(std::string msg) {
    if (!summary.stopped) {
      error(std::move(msg));
      summary.stopped = true;
    }
    if (ctxt) {
      xmlStopParser(ctxt);
    }
  }

  static Impl* self(void* ctx) { return static_cast<Impl*>(ctx); }

  // ---- value parsing helpers -------------------------------------------

  bool value_ok(std::string_view attr, std::string_view element, std::string_view value) {
    if (value.size() > options.max_value_bytes) {
      stop("attribute '" + std::string(attr) + "' of <" + std::string(element) + "> is " +
           std::to_string(value.size()) + " bytes, over the limit of " +
           std::to_string(options.max_value_bytes));
      return false;
    }
    return true;
  }

  // A value quoted in a message: at most 100 bytes of it.
  static std::string quote(std::string_view v) {
    return "'" + std::string(v.substr(0, 100)) + (v.size() > 100 ? "...'" : "'");
  }

  std::optional<Timestamp> datetime(std::string_view value, std::string_view what) {
    std::string why;
    std::string how;
    auto t = parse_datetime_lenient(value, &why, &how);
    if (!t) {
      value_error(std::string(what) + ": " + quote(value) + " is not a W3C datetime (" + why + "; dropped)");
    } else if (!how.empty()) {
      warning(std::string(what) + ": " + quote(value) + " is not a W3C datetime; read as " +
              format_w3c_datetime(*t) + " (" + how + ")");
    }
    return t;
  }

  std::optional<uint64_t> length(std::string_view value, std::string_view what) {
    uint64_t n = 0;
    auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || p != value.data() + value.size()) {
      value_error(std::string(what) + ": " + quote(value) + " is not a non-negative integer (dropped)");
      return std::nullopt;
    }
    if (n > k_max_length) {
      value_error(std::string(what) + ": " + quote(value) + " is over the largest length accepted (" +
                  std::to_string(k_max_length) + "; dropped)");
      return std::nullopt;
    }
    return n;
  }

  std::optional<std::string> media_type(std::string_view value, std::string_view what) {
    std::string why;
    if (!is_media_type(value, &why)) {
      value_error(std::string(what) + ": not a media type (" + why + "; dropped)");
      return std::nullopt;
    }
    return std::string(value);
  }

  std::vector<HashValue> hashes(std::string_view value, std::string_view what) {
    auto parsed = parse_hash_list(value);
    for (auto& e : parsed.errors) {
      value_error(std::string(what) + ": " + e);
    }
    for (auto& w : parsed.warnings) {
      warning(std::string(what) + ": " + w);
    }
    return std::move(parsed.values);
  }

  // Attributes of rs:md and rs:ln must be unprefixed; anything else is an
  // extension (kept), with a warning for ones that look like mistakes.
  void extension_attr(std::vector<ExtensionAttribute>& out, const Attr& a, std::string_view element) {
    if (a.ns == k_rs_ns) {
      warning("attribute '" + std::string(a.prefix) + ":" + std::string(a.name) + "' of <" +
              std::string(element) + "> must not have a namespace prefix (kept, ignored)");
    } else if (a.ns.empty()) {
      warning("unknown attribute '" + std::string(a.name) + "' on <" + std::string(element) +
              "> (kept, ignored)");
    }
    out.push_back(ExtensionAttribute{std::string(a.ns), std::string(a.prefix), std::string(a.name),
                                     std::string(a.value)});
  }

  Metadata parse_md(const std::vector<Attr>& attrs) {
    Metadata md;
    for (const auto& a : attrs) {
      if (!value_ok(a.name, "rs:md", a.value)) {
        return md;
      }
      if (!a.ns.empty()) {
        extension_attr(md.extensions, a, "rs:md");
        continue;
      }
      const std::string_view n = a.name;
      if (n == "capability") {
        md.capability = std::string(a.value);
      } else if (n == "at") {
        md.at = datetime(a.value, "<rs:md> attribute 'at'");
      } else if (n == "completed") {
        md.completed = datetime(a.value, "<rs:md> attribute 'completed'");
      } else if (n == "from") {
        md.from = datetime(a.value, "<rs:md> attribute 'from'");
      } else if (n == "until") {
        md.until = datetime(a.value, "<rs:md> attribute 'until'");
      } else if (n == "datetime") {
        md.datetime = datetime(a.value, "<rs:md> attribute 'datetime'");
      } else if (n == "change") {
        md.change = change_from_string(a.value);
        if (!md.change) {
          value_error("<rs:md> attribute 'change': " + quote(a.value) +
                      " is not one of created, updated, deleted (dropped)");
        }
      } else if (n == "hash") {
        md.hash = hashes(a.value, "<rs:md> attribute 'hash'");
      } else if (n == "length") {
        md.length = length(a.value, "<rs:md> attribute 'length'");
      } else if (n == "type") {
        md.type = media_type(a.value, "<rs:md> attribute 'type'");
      } else if (n == "encoding") {
        md.encoding = std::string(a.value);
      } else if (n == "path") {
        md.path = std::string(a.value);
      } else {
        extension_attr(md.extensions, a, "rs:md");
      }
    }
    return md;
  }

  // A link without its rel or href cannot be followed: it is dropped.
  std::optional<Link> parse_ln(const std::vector<Attr>& attrs) {
    Link ln;
    bool has_rel = false;
    bool has_href = false;
    for (const auto& a : attrs) {
      if (!value_ok(a.name, "rs:ln", a.value)) {
        return ln;
      }
      if (!a.ns.empty()) {
        extension_attr(ln.extensions, a, "rs:ln");
        continue;
      }
      const std::string_view n = a.name;
      if (n == "rel") {
        ln.rel = std::string(a.value);
        has_rel = true;
      } else if (n == "href") {
        ln.href = std::string(a.value);
        has_href = true;
      } else if (n == "hash") {
        ln.hash = hashes(a.value, "<rs:ln> attribute 'hash'");
      } else if (n == "length") {
        ln.length = length(a.value, "<rs:ln> attribute 'length'");
      } else if (n == "modified") {
        ln.modified = datetime(a.value, "<rs:ln> attribute 'modified'");
      } else if (n == "path") {
        ln.path = std::string(a.value);
      } else if (n == "pri") {
        auto v = length(a.value, "<rs:ln> attribute 'pri'");
        if (v && *v >= 1 && *v <= 999999) {
          ln.pri = static_cast<uint32_t>(*v);
        } else if (v) {
          value_error("<rs:ln> attribute 'pri': " + quote(a.value) + " is outside 1..999999 (dropped)");
        }
      } else if (n == "type") {
        ln.type = media_type(a.value, "<rs:ln> attribute 'type'");
      } else if (n == "encoding") {
        ln.encoding = std::string(a.value);
      } else {
        extension_attr(ln.extensions, a, "rs:ln");
      }
    }
    if (!has_rel || !has_href) {
      value_error(std::string("<rs:ln> has no ") + (has_rel ? "href" : "rel") +
                  " attribute (mandatory; the link is dropped)");
      return std::nullopt;
    }
    return ln;
  }

  XmlNode make_node(std::string_view name, std::string_view prefix, std::string_view ns,
                    const std::vector<Attr>& attrs) {
    XmlNode node;
    node.name = std::string(name);
    node.prefix = std::string(prefix);
    node.ns = std::string(ns);
    for (const auto& a : attrs) {
      if (!value_ok(a.name, name, a.value)) {
        break;
      }
      node.attributes.push_back(ExtensionAttribute{std::string(a.ns), std::string(a.prefix),
                                                   std::string(a.name), std::string(a.value)});
    }
    return node;
  }

  void deliver_header() {
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

  // ---- SAX callbacks ------------------------------------------------------

  static void on_start(void* ctx, const xmlChar* localname, const xmlChar* prefix, const xmlChar* uri,
                       int nb_namespaces, const xmlChar** namespaces, int nb_attributes, int,
                       const xmlChar** attributes) {
    Impl* r = self(ctx);
    if (r->exception) {
      return;
    }
    try {
      std::vector<Attr> attrs;
      attrs.reserve(static_cast<size_t>(nb_attributes));
      for (int i = 0; i < nb_attributes; ++i) {
        const xmlChar** a = attributes + 5 * i;
        attrs.push_back(Attr{sv(a[0]), sv(a[1]), sv(a[2]),
                             std::string_view(reinterpret_cast<const char*>(a[3]),
                                              static_cast<size_t>(a[4] - a[3]))});
      }
      r->start(sv(localname), sv(prefix), sv(uri), nb_namespaces, namespaces, attrs);
    } catch (...) {
      r->exception = std::current_exception();
      xmlStopParser(r->ctxt);
    }
  }

  static void on_end(void* ctx, const xmlChar*, const xmlChar*, const xmlChar*) {
    Impl* r = self(ctx);
    if (r->exception) {
      return;
    }
    try {
      r->end();
    } catch (...) {
      r->exception = std::current_exception();
      xmlStopParser(r->ctxt);
    }
  }

  static void on_chars(void* ctx, const xmlChar* ch, int len) {
    Impl* r = self(ctx);
    if (r->stack.empty()) {
      return;
    }
    Ctx c = r->stack.back();
    if (c != Ctx::text && c != Ctx::extension) {
      return;
    }
    std::string& target = c == Ctx::text ? r->text : r->ext_stack.back().text;
    if (target.size() + static_cast<size_t>(len) > r->options.max_value_bytes) {
      r->stop("element text is over the limit of " + std::to_string(r->options.max_value_bytes) +
              " bytes");
      return;
    }
    target.append(reinterpret_cast<const char*>(ch), static_cast<size_t>(len));
  }

  static void on_doctype(void* ctx, const xmlChar* name, const xmlChar*, const xmlChar*) {
    self(ctx)->stop("DOCTYPE declaration <!DOCTYPE " + std::string(sv(name)) +
                    "> is not allowed (entities are never expanded)");
  }

  static void on_entity_decl(void* ctx, const xmlChar* name, int, const xmlChar*, const xmlChar*,
                             xmlChar*) {
    self(ctx)->stop("entity declaration '" + std::string(sv(name)) + "' is not allowed");
  }

  static void on_error(void* ctx, xmlErrorPtr err) {
    Impl* r = self(ctx);
    if (!err || r->summary.stopped) {
      return;
    }
    std::string msg(err->message ? err->message : "XML error");
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
      msg.pop_back();
    }
    uint64_t l = err->line > 0 ? static_cast<uint64_t>(err->line) : r->line();
    if (err->level == XML_ERR_WARNING) {
      r->diag(Severity::warning, l, "XML: " + msg);
      return;
    }
    r->error_at(l, "not well-formed XML: " + msg);
    if (err->level == XML_ERR_FATAL) {
      r->summary.stopped = true;
    }
  }

  void start(std::string_view name, std::string_view prefix, std::string_view ns, int nb_namespaces,
             const xmlChar** namespaces, const std::vector<Attr>& attrs) {
    if (stack.size() >= options.max_depth) {
      stop("elements nested deeper than " + std::to_string(options.max_depth));
      return;
    }
    const Ctx parent = stack.empty() ? Ctx::none : stack.back();
    switch (parent) {
    case Ctx::none:
      start_root(name, ns, nb_namespaces, namespaces);
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
      ext_stack.push_back(make_node(name, prefix, ns, attrs));
      stack.push_back(Ctx::extension);
      return;
    }
  }

  void start_root(std::string_view name, std::string_view ns, int nb_namespaces,
                  const xmlChar** namespaces) {
    root_seen = true;
    root_line = line();
    if (ns != k_sitemap_ns || (name != "urlset" && name != "sitemapindex")) {
      stop("root element <" + std::string(name) + "> in namespace '" + std::string(ns) +
           "' is not a Sitemap <urlset> or <sitemapindex> (" + std::string(k_sitemap_ns) + ")");
      return;
    }
    header.root = name == "urlset" ? RootElement::urlset : RootElement::sitemapindex;
    for (int i = 0; i < nb_namespaces; ++i) {
      std::string_view p = sv(namespaces[2 * i]);
      std::string_view u = sv(namespaces[2 * i + 1]);
      if (u != k_sitemap_ns && u != k_rs_ns) {
        header.namespaces.emplace_back(std::string(p), std::string(u));
      }
    }
    stack.push_back(Ctx::root);
  }

  void start_in_root(std::string_view name, std::string_view prefix, std::string_view ns,
                     const std::vector<Attr>& attrs) {
    const bool late = header_delivered;
    if (ns == k_rs_ns && (name == "md" || name == "ln")) {
      if (late) {
        warning("<rs:" + std::string(name) + "> of the document comes after its entries");
      }
      if (name == "md") {
        if (header.md && !header.plain_sitemap) {
          error("the document has more than one <rs:md>");
        } else {
          header.md = parse_md(attrs);
          header.plain_sitemap = false;
        }
      } else if (auto ln = parse_ln(attrs)) {
        header.links.push_back(std::move(*ln));
      }
      stack.push_back(Ctx::skip);
      return;
    }
    if (ns == k_sitemap_ns && (name == "url" || name == "sitemap")) {
      const bool expected =
          (name == "url") == (header.root == RootElement::urlset);
      if (!expected) {
        error("<" + std::string(name) + "> inside <" + std::string(to_string(header.root)) + ">");
      }
      deliver_header();
      entry = Entry{};
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
    ext_stack.push_back(make_node(name, prefix, ns, attrs));
    stack.push_back(Ctx::extension);
  }

  void start_in_entry(std::string_view name, std::string_view prefix, std::string_view ns,
                      const std::vector<Attr>& attrs) {
    if (ns == k_sitemap_ns) {
      if (name == "loc" || name == "lastmod" || name == "changefreq" || name == "priority") {
        text_field = name == "loc"       ? TextField::loc
                     : name == "lastmod" ? TextField::lastmod
                     : name == "changefreq" ? TextField::changefreq
                                            : TextField::priority;
        text.clear();
        stack.push_back(Ctx::text);
        return;
      }
    } else if (ns == k_rs_ns) {
      if (name == "md") {
        if (entry_md_seen) {
          value_error("an entry has more than one <rs:md> (it is not repeatable; the second is ignored)");
        } else {
          entry.md = parse_md(attrs);
          entry_md_seen = true;
        }
        stack.push_back(Ctx::skip);
        return;
      }
      if (name == "ln") {
        if (auto ln = parse_ln(attrs)) {
          entry.links.push_back(std::move(*ln));
        }
        stack.push_back(Ctx::skip);
        return;
      }
    }
    ext_stack.push_back(make_node(name, prefix, ns, attrs));
    stack.push_back(Ctx::extension);
  }

  void end() {
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

  static std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\n' || s.front() == '\t' || s.front() == '\r')) {
      s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\t' || s.back() == '\r')) {
      s.remove_suffix(1);
    }
    return s;
  }

  void end_text() {
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
      entry.lastmod = datetime(v, "<lastmod>");
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
  void resolve(std::string& ref, std::string_view what, uint64_t line_no) {
    if (ref.empty() || has_uri_scheme(ref) || options.base_url.empty()) {
      return;
    }
    auto abs = resolve_reference(options.base_url, ref);
    if (!abs) {
      return; // the validator reports it
    }
    diag(Severity::warning, line_no,
         std::string(what) + " " + quote(ref) + " is relative: read as " + quote(*abs) +
             " (resolved against the document's URL)");
    ref = std::move(*abs);
  }

  // A change without a time of its own happened, as far as the document
  // tells, no earlier than the change before it: it takes that change's
  // time (so that the document stays in order and a Destination's
  // watermark neither skips nor repeats it), else the document's `from`,
  // else its `until`, else the time the document was read.
  void infer_change_time() {
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

  void end_entry() {
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

  // ---- input --------------------------------------------------------------

  // Sitemap documents are UTF-8 (sitemaps.org), and so is every document
  // Tributary reads: an encoding declaration is ignored
  // (XML_PARSE_IGNORE_ENC), and the bytes are checked here as they arrive.
  // Each byte that cannot begin or continue a UTF-8 sequence (overlong
  // forms and surrogates included) reaches libxml2 as U+FFFD, and the
  // document gets one error at its end, so it is never applied. A sequence
  // cut by the end of a piece waits for the next. libxml2's own handling of
  // such bytes, and of an unknown declared encoding, depended on where the
  // input was cut into pieces (found by fuzzing: the same bytes read whole
  // and in pieces gave different entries and errors).
  void parse(const char* data, size_t size, bool terminate) {
    if (summary.stopped || exception) {
      return;
    }
    summary.bytes += size;
    if (summary.bytes > options.max_bytes) {
      stop("document is larger than the limit of " + std::to_string(options.max_bytes) +
           " bytes (uncompressed); stopped reading");
      return;
    }
    std::string_view in(data, size);
    std::string joined;
    if (!utf8_carry.empty()) {
      joined = utf8_carry;
      joined.append(in);
      utf8_carry.clear();
      in = joined;
    }
    std::string fixed;
    bool replaced = false;
    size_t from = 0;
    size_t end = in.size(); // what goes to the parser now
    for (size_t i = 0; i < in.size();) {
      const auto c = static_cast<unsigned char>(in[i]);
      if (c < 0x80) {
        ++i;
        continue;
      }
      size_t n = 0;
      unsigned char lo = 0x80;
      unsigned char hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
      } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80;
        hi = c == 0xED ? 0x9F : 0xBF;
      } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        lo = c == 0xF0 ? 0x90 : 0x80;
        hi = c == 0xF4 ? 0x8F : 0xBF;
      }
      bool ok = n > 0;
      size_t j = 1;
      for (; ok && j < n && i + j < in.size(); ++j) {
        const auto d = static_cast<unsigned char>(in[i + j]);
        ok = j == 1 ? d >= lo && d <= hi : d >= 0x80 && d <= 0xBF;
      }
      if (ok && j < n) { // cut by the end of this piece
        if (!terminate) {
          utf8_carry = std::string(in.substr(i));
          end = i;
          break;
        }
        ok = false;
      }
      if (ok) {
        i += n;
        continue;
      }
      fixed.append(in.substr(from, i - from));
      fixed += "\xEF\xBF\xBD";
      replaced = true;
      if (utf8_bad++ == 0) {
        utf8_first = utf8_pos + i;
      }
      from = ++i;
    }
    utf8_pos += end;
    if (replaced) {
      fixed.append(in.substr(from, end - from));
      feed_parser(fixed.data(), fixed.size(), terminate);
    } else {
      feed_parser(in.data(), end, terminate);
    }
  }

  void feed_parser(const char* data, size_t size, bool terminate) {
    if (!ctxt) {
      ctxt = xmlCreatePushParserCtxt(&sax, this, data, static_cast<int>(size), nullptr);
      if (!ctxt) {
        stop("could not create the XML parser");
        return;
      }
      // NOENT: predefined entities and character references in attribute
      // values are decoded (without it libxml2 hands `&` back as `&#38;`).
      // No other entity can exist: a DOCTYPE stops the parser on sight.
      xmlCtxtUseOptions(ctxt, XML_PARSE_NOENT | XML_PARSE_NONET | XML_PARSE_NOCDATA | XML_PARSE_IGNORE_ENC);
      if (terminate) {
        check_parser(xmlParseChunk(ctxt, nullptr, 0, 1));
      }
      return;
    }
    check_parser(xmlParseChunk(ctxt, data, static_cast<int>(size), terminate ? 1 : 0));
  }

  // The parser's own verdict after a chunk. An error it reports only
  // through its generic handler (bytes that do not decode in the declared
  // encoding, found when the input came in pieces) never reaches on_error:
  // without this the document read as well-formed and empty (found by
  // fuzzing: the same bytes read whole failed).
  void check_parser(int rc) {
    if (summary.stopped || exception || (rc == 0 && ctxt->wellFormed)) {
      return;
    }
    const xmlError* e = xmlCtxtGetLastError(ctxt);
    // Without an error of its own, the parser halted on input it could not
    // take: in libxml2 2.9 xmlParseChunk answers XML_PARSER_EOF (-1) when
    // the bytes do not convert from the declared encoding, and
    // XML_ERR_INVALID_ENCODING when a converted buffer fails.
    std::string msg = e && e->message ? e->message
                      : rc == XML_PARSER_EOF || rc == XML_ERR_INVALID_ENCODING
                          ? "the bytes do not decode in the document's declared encoding"
                          : "the XML parser stopped (libxml2 code " + std::to_string(rc) + ")";
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
      msg.pop_back();
    }
    stop("not well-formed XML: " + msg);
  }

  void inflate_and_parse(const unsigned char* data, size_t size, bool terminate) {
    zs.next_in = const_cast<unsigned char*>(data);
    zs.avail_in = static_cast<uInt>(size);
    unsigned char out[k_chunk];
    while (!summary.stopped && !exception) {
      if (gzip_member_done) {
        if (zs.avail_in == 0) {
          break;
        }
        // Concatenated gzip members form one stream (RFC 1952).
        inflateReset(&zs);
        gzip_member_done = false;
      }
      zs.next_out = out;
      zs.avail_out = sizeof out;
      int rc = inflate(&zs, Z_NO_FLUSH);
      size_t produced = sizeof out - zs.avail_out;
      if (produced > 0) {
        parse(reinterpret_cast<const char*>(out), produced, false);
      }
      if (rc == Z_STREAM_END) {
        gzip_member_done = true;
        continue;
      }
      if (rc == Z_BUF_ERROR || (rc == Z_OK && zs.avail_in == 0 && produced < sizeof out)) {
        break; // needs more input
      }
      if (rc != Z_OK) {
        stop(std::string("gzip data is corrupt: ") + (zs.msg ? zs.msg : "inflate failed"));
        return;
      }
    }
    if (terminate && !summary.stopped && !exception) {
      if (!gzip_member_done) {
        stop("gzip data is truncated");
        return;
      }
      parse(nullptr, 0, true);
    }
  }

  void push(const char* data, size_t size, bool terminate) {
    if (!decided) {
      pending.append(data, size);
      if (pending.size() < 4 && !terminate) {
        return;
      }
      decided = true;
      summary.gzip = pending.size() >= 2 && static_cast<unsigned char>(pending[0]) == 0x1f &&
                     static_cast<unsigned char>(pending[1]) == 0x8b;
      if (summary.gzip) {
        if (inflateInit2(&zs, 15 + 16) != Z_OK) {
          stop("could not initialise gzip decompression");
          return;
        }
        zs_open = true;
      }
      std::string first;
      first.swap(pending);
      push_decided(first.data(), first.size(), terminate);
      return;
    }
    push_decided(data, size, terminate);
  }

  void push_decided(const char* data, size_t size, bool terminate) {
    if (summary.gzip) {
      summary.compressed_bytes += size;
      inflate_and_parse(reinterpret_cast<const unsigned char*>(data), size, terminate);
    } else {
      parse(data, size, terminate);
    }
  }
};

Reader::Reader(DocumentHandler& handler, ReaderOptions options)
    : m_impl(std::make_unique<Impl>(handler, options)) {
  init_libxml_once();
}

Reader::~Reader() = default;

bool Reader::feed(const void* data, size_t size) {
  Impl& r = *m_impl;
  if (r.summary.stopped) {
    return false;
  }
  const char* p = static_cast<const char*>(data);
  // libxml2 takes int sizes: hand large buffers over in chunks.
  while (size > 0 && !r.summary.stopped && !r.exception) {
    size_t n = std::min(size, k_chunk * 16);
    r.push(p, n, false);
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
  if (!r.summary.stopped && !r.decided && r.pending.empty()) {
    r.stop("document is empty");
  }
  if (!r.summary.stopped) {
    r.push("", 0, true);
  }
  if (r.exception) {
    std::rethrow_exception(r.exception);
  }
  if (r.utf8_bad > 0 && !r.summary.stopped) {
    // Once, at the end (where the parser was when the bytes came depends
    // on how the input was cut); a document that stopped has its error.
    r.diag(Severity::error, r.line(),
           "not UTF-8: " + std::to_string(r.utf8_bad) + " byte(s) that are not, the first at byte " +
               std::to_string(r.utf8_first) + " (Sitemap documents are UTF-8)");
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
