#pragma once

#include "resourcesync/model.h"

#include <string>

namespace tributary::store {

// A Source's entry as a record (retry.entry, jsonb, schema 0018): every
// field the model holds, to the microsecond and byte, including what the
// XML form could not carry (a lastmod given as a date only, a change time
// the reader inferred) and extension elements and attributes. Not the XML
// text: a record is read back without the protocol reader.
std::string entry_to_json(const rs::Entry& e);
// Reads one back; should the text not be an entry for `uri` (it cannot be,
// unless the row was edited), the entry names the URI alone, so the
// resource is still fetched (unverified) rather than never.
rs::Entry entry_from_json(const std::string& text, const std::string& uri);

} // namespace tributary::store
