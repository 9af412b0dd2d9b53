#pragma once

// Room resourcesync/reader_values: the values of a document's attributes
// and elements (datetimes, lengths, media types, hashes, <rs:md>, <rs:ln>,
// the attributes of an unknown element), each read leniently. A value that
// cannot be used costs itself only (dropped, and reported to the sink),
// never its entry. Holds no state of the document. Internal to the reader.

#include "resourcesync/model.h"
#include "resourcesync/reader.h"
#include "resourcesync/xml_scanner.h"

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tributary::rs::reading {

// An attribute as the XML scanner reports it (local name, prefix,
// namespace, decoded value).
using Attr = xml::Attribute;

class ValueReader {
public:
  // Where what is found goes.
  class Sink {
  public:
    virtual ~Sink() = default;
    // A value that cannot be used: it is dropped.
    virtual void value_error(std::string msg) = 0;
    // A value read with a repair (a datetime without seconds, ...).
    virtual void warning(std::string msg) = 0;
    // Stops reading for good (a value past the size limit).
    virtual void stop(std::string msg) = 0;
  };

  // `sink` and `options` must outlive this.
  ValueReader(Sink& sink, const ReaderOptions& options) : m_sink(sink), m_options(options) {}

  // A value quoted in a message: at most 100 bytes of it.
  static std::string quote(std::string_view v);

  std::optional<Timestamp> datetime(std::string_view value, std::string_view what);
  std::optional<uint64_t> length(std::string_view value, std::string_view what);
  std::optional<std::string> media_type(std::string_view value, std::string_view what);
  std::vector<HashValue> hashes(std::string_view value, std::string_view what);
  // <rs:md>'s attributes into `md` (empty), read in place: an entry's is
  // not built aside and moved.
  void parse_md(std::span<const Attr> attrs, Metadata& md);
  std::optional<Link> parse_ln(std::span<const Attr> attrs);
  // An element we do not know, kept as it was (its attributes checked).
  XmlNode make_node(std::string_view name, std::string_view prefix, std::string_view ns,
                    std::span<const Attr> attrs);

private:
  // False (and the reading stopped) when the value is past the size limit.
  bool value_ok(std::string_view attr, std::string_view element, std::string_view value);
  void extension_attr(std::vector<ExtensionAttribute>& out, const Attr& a, std::string_view element);

  Sink& m_sink;
  const ReaderOptions& m_options;
  std::string m_last_type; // the media type accepted last
  // The datetime read last without a word to say, and what it was read as
  // (a Change List entry's <lastmod> and datetime are most often one).
  std::string m_last_datetime;
  Timestamp m_last_timestamp{};
};

} // namespace tributary::rs::reading
