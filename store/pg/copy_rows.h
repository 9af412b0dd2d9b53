#pragma once

// COPY ... FROM STDIN as PgStore writes it: rows formatted by CopyText
// (copy_text.h) and handed to libpqxx a buffer at a time, and the columns
// of a resource and of its content as the resource and change_log tables
// hold them. Not for use outside store/pg/.

#include "store/pg/copy_text.h"
#include "store/store.h"

#include <pqxx/tablewriter>
#include <pqxx/transaction_base>

#include <string>
#include <vector>

namespace tributary::store::pg_detail {

// A COPY into `table`, its rows handed to libpqxx 64 KiB at a time (COPY's
// data is one stream: rows need not come one a call). libpqxx 6.4 takes
// text it did not format only through tablewriter (stream_to's
// write_raw_line is private), deprecated there in favour of stream_to but
// the same COPY underneath; the deprecation is silenced here alone.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
class CopyRows {
public:
  CopyRows(pqxx::transaction_base& tx, const std::string& table, const std::vector<std::string>& columns);
  CopyText& row() { return m_text; }
  void end_row();
  void complete();

private:
  void flush();

  pqxx::tablewriter m_writer;
  CopyText m_text;
};
#pragma GCC diagnostic pop

void put_time(CopyText& t, const std::optional<Timestamp>& v);
// A resource's columns, in k_resource_columns_sql's order.
void put_resource(CopyText& t, const ResourceRecord& r);
// Its content's: length, md5, sha1, sha256, type, encoding, links,
// blob_sha256 (in both resource and change_log, in this order).
void put_content(CopyText& t, const ResourceRecord& r);

} // namespace tributary::store::pg_detail
