#include "resourcesync/reader_values.h"

#include "common/text.h"
#include "resourcesync/datetime.h"
#include "resourcesync/hash.h"
#include "resourcesync/validator.h"

#include <charconv>

namespace tributary::rs::reading {

bool ValueReader::value_ok(std::string_view attr, std::string_view element, std::string_view value) {
  if (value.size() > m_options.max_value_bytes) {
    m_sink.stop("attribute '" + std::string(attr) + "' of <" + std::string(element) + "> is " +
         std::to_string(value.size()) + " bytes, over the limit of " +
         std::to_string(m_options.max_value_bytes));
    return false;
  }
  return true;
}

// A value quoted in a message: at most 100 bytes of it.
std::string ValueReader::quote(std::string_view v) {
  return "'" + std::string(v.substr(0, 100)) + (v.size() > 100 ? "...'" : "'");
}

std::optional<Timestamp> ValueReader::datetime(std::string_view value, std::string_view what) {
  if (!value.empty() && same(value, m_last_datetime)) {
    return m_last_timestamp;
  }
  std::string why;
  std::string how;
  auto t = parse_datetime_lenient(value, &why, &how);
  if (t && how.empty()) {
    m_last_datetime.assign(value);
    m_last_timestamp = *t;
  }
  if (!t) {
    m_sink.value_error(std::string(what) + ": " + quote(value) + " is not a W3C datetime (" + why + "; dropped)");
  } else if (!how.empty()) {
    m_sink.warning(std::string(what) + ": " + quote(value) + " is not a W3C datetime; read as " +
            format_w3c_datetime(*t) + " (" + how + ")");
  }
  return t;
}

std::optional<uint64_t> ValueReader::length(std::string_view value, std::string_view what) {
  uint64_t n = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || p != value.data() + value.size()) {
    m_sink.value_error(std::string(what) + ": " + quote(value) + " is not a non-negative integer (dropped)");
    return std::nullopt;
  }
  if (n > k_max_length) {
    m_sink.value_error(std::string(what) + ": " + quote(value) + " is over the largest length accepted (" +
                std::to_string(k_max_length) + "; dropped)");
    return std::nullopt;
  }
  return n;
}

std::optional<std::string> ValueReader::media_type(std::string_view value, std::string_view what) {
  // A document names few types, entry after entry: the one just accepted
  // needs no second look.
  if (!value.empty() && same(value, m_last_type)) {
    return std::string(value);
  }
  std::string why;
  if (!is_media_type(value, &why)) {
    m_sink.value_error(std::string(what) + ": not a media type (" + why + "; dropped)");
    return std::nullopt;
  }
  m_last_type.assign(value);
  return std::string(value);
}

std::vector<HashValue> ValueReader::hashes(std::string_view value, std::string_view what) {
  auto parsed = parse_hash_list(value);
  for (auto& e : parsed.errors) {
    m_sink.value_error(std::string(what) + ": " + e);
  }
  for (auto& w : parsed.warnings) {
    m_sink.warning(std::string(what) + ": " + w);
  }
  return std::move(parsed.values);
}

// Attributes of rs:md and rs:ln must be unprefixed; anything else is an
// extension (kept), with a warning for ones that look like mistakes.
void ValueReader::extension_attr(std::vector<ExtensionAttribute>& out, const Attr& a, std::string_view element) {
  if (a.ns == k_rs_ns) {
    m_sink.warning("attribute '" + std::string(a.prefix) + ":" + std::string(a.name) + "' of <" +
            std::string(element) + "> must not have a namespace prefix (kept, ignored)");
  } else if (a.ns.empty()) {
    m_sink.warning("unknown attribute '" + std::string(a.name) + "' on <" + std::string(element) +
            "> (kept, ignored)");
  }
  out.push_back(ExtensionAttribute{std::string(a.ns), std::string(a.prefix), std::string(a.name),
                                   std::string(a.value)});
}

void ValueReader::parse_md(std::span<const Attr> attrs, Metadata& md) {
  for (const auto& a : attrs) {
    if (!value_ok(a.name, "rs:md", a.value)) {
      return;
    }
    if (!a.ns.empty()) {
      extension_attr(md.extensions, a, "rs:md");
      continue;
    }
    const std::string_view n = a.name;
    if (same(n, "capability")) {
      md.capability = std::string(a.value);
    } else if (same(n, "at")) {
      md.at = datetime(a.value, "<rs:md> attribute 'at'");
    } else if (same(n, "completed")) {
      md.completed = datetime(a.value, "<rs:md> attribute 'completed'");
    } else if (same(n, "from")) {
      md.from = datetime(a.value, "<rs:md> attribute 'from'");
    } else if (same(n, "until")) {
      md.until = datetime(a.value, "<rs:md> attribute 'until'");
    } else if (same(n, "datetime")) {
      md.datetime = datetime(a.value, "<rs:md> attribute 'datetime'");
    } else if (same(n, "change")) {
      md.change = change_from_string(a.value);
      if (!md.change) {
        m_sink.value_error("<rs:md> attribute 'change': " + quote(a.value) +
                    " is not one of created, updated, deleted (dropped)");
      }
    } else if (same(n, "hash")) {
      md.hash = hashes(a.value, "<rs:md> attribute 'hash'");
    } else if (same(n, "length")) {
      md.length = length(a.value, "<rs:md> attribute 'length'");
    } else if (same(n, "type")) {
      md.type = media_type(a.value, "<rs:md> attribute 'type'");
    } else if (same(n, "encoding")) {
      md.encoding = std::string(a.value);
    } else if (same(n, "path")) {
      md.path = std::string(a.value);
    } else {
      extension_attr(md.extensions, a, "rs:md");
    }
  }
}

// A link without its rel or href cannot be followed: it is dropped.
std::optional<Link> ValueReader::parse_ln(std::span<const Attr> attrs) {
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
    if (same(n, "rel")) {
      ln.rel = std::string(a.value);
      has_rel = true;
    } else if (same(n, "href")) {
      ln.href = std::string(a.value);
      has_href = true;
    } else if (same(n, "hash")) {
      ln.hash = hashes(a.value, "<rs:ln> attribute 'hash'");
    } else if (same(n, "length")) {
      ln.length = length(a.value, "<rs:ln> attribute 'length'");
    } else if (same(n, "modified")) {
      ln.modified = datetime(a.value, "<rs:ln> attribute 'modified'");
    } else if (same(n, "path")) {
      ln.path = std::string(a.value);
    } else if (same(n, "pri")) {
      auto v = length(a.value, "<rs:ln> attribute 'pri'");
      if (v && *v >= 1 && *v <= 999999) {
        ln.pri = static_cast<uint32_t>(*v);
      } else if (v) {
        m_sink.value_error("<rs:ln> attribute 'pri': " + quote(a.value) + " is outside 1..999999 (dropped)");
      }
    } else if (same(n, "type")) {
      ln.type = media_type(a.value, "<rs:ln> attribute 'type'");
    } else if (same(n, "encoding")) {
      ln.encoding = std::string(a.value);
    } else {
      extension_attr(ln.extensions, a, "rs:ln");
    }
  }
  if (!has_rel || !has_href) {
    m_sink.value_error(std::string("<rs:ln> has no ") + (has_rel ? "href" : "rel") +
                " attribute (mandatory; the link is dropped)");
    return std::nullopt;
  }
  return ln;
}

XmlNode ValueReader::make_node(std::string_view name, std::string_view prefix, std::string_view ns,
                  std::span<const Attr> attrs) {
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

} // namespace tributary::rs::reading
