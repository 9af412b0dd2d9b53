#pragma once

// Room republisher/oai_protocol: the OAI-PMH 2.0 protocol as our data
// provider reads and writes it, without I/O: a request's arguments checked
// against its verb (badVerb, badArgument), datestamps at day and second
// granularity, and the stateless resumption token. Every byte of a request
// is untrusted: what does not parse is an OAI-PMH error, never a throw.

#include "resourcesync/datetime.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace tributary::pub::oai {

enum class Verb { identify, list_metadata_formats, list_sets, get_record, list_identifiers, list_records };

// A request whose arguments suit its verb.
struct Arguments {
  Verb verb = Verb::identify;
  std::string verb_name;
  std::optional<std::string> identifier;
  std::optional<std::string> metadata_prefix;
  std::optional<std::string> from;
  std::optional<std::string> until;
  std::optional<std::string> set;
  std::optional<std::string> resumption_token;
  // The arguments as given, in order, for <request>'s attributes.
  std::vector<std::pair<std::string, std::string>> given;
};

// An OAI-PMH error: its code (badVerb, badArgument, ...) and a message.
struct ProtocolError {
  std::string code;
  std::string message;
};

// Reads application/x-www-form-urlencoded arguments (a GET's query or a
// POST's body): an unknown or missing verb is badVerb; an argument given
// twice, one the verb does not take, one it requires missing, or a
// resumptionToken beside anything but the verb is badArgument.
std::variant<Arguments, ProtocolError> parse_arguments(std::string_view form);

// A datestamp argument: "YYYY-MM-DD" (day) or "YYYY-MM-DDThh:mm:ssZ"
// (second); nullopt for anything else.
struct Datestamp {
  rs::Timestamp at;
  bool day = false;
  // The first instant after what this names (the next day, or second):
  // `until` is inclusive at its granularity.
  rs::Timestamp end() const;
};
std::optional<Datestamp> parse_datestamp(std::string_view s);
// A datestamp at second granularity, "YYYY-MM-DDThh:mm:ssZ" (cut, not
// rounded: a record is never shown later than it was stored).
std::string format_datestamp(rs::Timestamp t);

// Where a list goes on: everything the next page needs, so that a token
// never expires, gives the same page when retried, and works on any node.
struct Token {
  bool records = true; // ListRecords, else ListIdentifiers
  std::string metadata_prefix;
  std::string set;                  // empty: every set
  std::optional<rs::Timestamp> from;
  std::optional<rs::Timestamp> until_end; // the first instant past `until`
  rs::Timestamp key_datestamp;      // the last record shown
  int64_t key_feed = 0;
  std::string key_uri;
  uint64_t cursor = 0;              // records shown before the next page
};
std::string encode_token(const Token& t);
// nullopt for a token we did not write (or that was cut or altered).
std::optional<Token> decode_token(std::string_view s);

} // namespace tributary::pub::oai
