#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace tributary::rs {

// A point in time in UTC, kept to the microsecond. Every W3C datetime in a
// ResourceSync document (at, completed, from, until, datetime, lastmod,
// modified) is held as one of these.
using Timestamp = std::chrono::sys_time<std::chrono::microseconds>;

// Parses a W3C-DTF datetime (https://www.w3.org/TR/NOTE-datetime): `YYYY`,
// `YYYY-MM`, `YYYY-MM-DD`, `YYYY-MM-DDThh:mmTZD`, `YYYY-MM-DDThh:mm:ssTZD`,
// `YYYY-MM-DDThh:mm:ss.sTZD` with TZD `Z` or `±hh:mm`. Missing parts take
// their smallest value; fractions past microseconds are truncated. Returns
// nullopt for anything else (no surrounding whitespace, no lowercase `t`/`z`,
// no leap seconds) and writes the reason to `why` when given.
std::optional<Timestamp> parse_w3c_datetime(std::string_view text,
                                            std::string* why = nullptr);

// Parses what `parse_w3c_datetime` refuses but real Sitemap writers emit
// and whose meaning is plain: a space for the `T`, lower-case `t`/`z`, a
// time without a zone (read as UTC, as sitemap generators mean it), a zone
// without its colon (`+0100`). Strict forms parse as they are, with `how`
// left empty; a tolerated form sets `how` to what was assumed. nullopt
// (with `why`) for anything else.
std::optional<Timestamp> parse_datetime_lenient(std::string_view text, std::string* why = nullptr,
                                                std::string* how = nullptr);

// Whether a W3C datetime gives a date and no time of day (`YYYY-MM-DD`,
// `YYYY-MM`, `YYYY`): a value that cannot tell two changes of one day apart.
bool is_date_only(std::string_view text);

// Canonical form `YYYY-MM-DDThh:mm:ss[.ffffff]Z`: the fraction only when
// non-zero, always six digits.
std::string format_w3c_datetime(Timestamp t);

// Appends the canonical form to `out` without a temporary string.
void append_w3c_datetime(std::string& out, Timestamp t);

} // namespace tributary::rs
