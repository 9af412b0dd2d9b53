#pragma once

#include "resourcesync/model.h"

// The attributes of <rs:md> and <rs:ln>, one table each, in the order the
// writer writes them: the writer, the store's JSON (store/pg/entry_json)
// and the status API's JSON (aggregator/cli/document_json) walk these, so
// that a field of the model is named once. Extension attributes are not in
// the tables: each format keeps them in a form of its own.
//
// `visit(name, field)` is called for each field, with the field's own type:
// std::optional<std::string>, std::optional<Timestamp>,
// std::optional<Change>, std::vector<HashValue>, std::optional<uint64_t>,
// std::optional<uint32_t> or std::string. `M` may be const.
namespace tributary::rs {

template <class M, class Visit>
void each_md_field(M& md, Visit&& visit) {
  visit("capability", md.capability);
  visit("at", md.at);
  visit("completed", md.completed);
  visit("from", md.from);
  visit("until", md.until);
  visit("change", md.change);
  visit("datetime", md.datetime);
  visit("hash", md.hash);
  visit("length", md.length);
  visit("type", md.type);
  visit("encoding", md.encoding);
  visit("path", md.path);
}

template <class L, class Visit>
void each_ln_field(L& ln, Visit&& visit) {
  visit("rel", ln.rel);
  visit("href", ln.href);
  visit("hash", ln.hash);
  visit("length", ln.length);
  visit("modified", ln.modified);
  visit("path", ln.path);
  visit("pri", ln.pri);
  visit("type", ln.type);
  visit("encoding", ln.encoding);
}

} // namespace tributary::rs
