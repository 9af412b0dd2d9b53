#include "sync_engine/content_fetch.h"

#include "sync_engine/fetch_error_text.h"
#include "sync_engine/retry.h"

#include <algorithm>

namespace tributary::sync {

std::vector<std::string> candidate_locations(const std::string& loc, const std::vector<rs::Link>& links) {
  std::vector<const rs::Link*> dups;
  for (const auto& l : links) {
    if (l.rel == "duplicate" && !l.href.empty()) {
      dups.push_back(&l);
    }
  }
  std::stable_sort(dups.begin(), dups.end(),
                   [](const rs::Link* a, const rs::Link* b) { return a->effective_pri() < b->effective_pri(); });
  std::vector<std::string> out;
  for (const auto* d : dups) {
    if (std::find(out.begin(), out.end(), d->href) == out.end()) {
      out.push_back(d->href);
    }
  }
  if (std::find(out.begin(), out.end(), loc) == out.end()) {
    out.push_back(loc);
  }
  return out;
}

namespace {

// Why the bytes `w` received from `url` are not what the entry announced
// (its length, its strongest hash); none when they are.
std::optional<std::string> not_as_announced(store::BlobStore::Writer& w, const Expected& expected,
                                            const std::string& url) {
  if (expected.length && w.size() != *expected.length) {
    return url + ": length " + std::to_string(w.size()) + ", expected " + std::to_string(*expected.length);
  }
  if (const rs::HashValue* check = rs::strongest_hash(expected.hashes)) {
    std::string mismatch;
    if (!rs::hashes_match(std::span(check, 1), w.digests(), &mismatch)) {
      return "hash mismatch for " + url + ": " + mismatch;
    }
  }
  return std::nullopt;
}

} // namespace

std::vector<rs::HashAlgorithm> digests_to_keep(const Expected& expected) {
  const rs::HashValue* check = rs::strongest_hash(expected.hashes);
  std::vector<rs::HashAlgorithm> extra;
  if (check) {
    extra.push_back(*check->known());
  }
  // Keep every digest we can store, so later audits can compare any of them.
  for (auto a : {rs::HashAlgorithm::md5, rs::HashAlgorithm::sha1}) {
    for (const auto& h : expected.hashes) {
      if (h.known() == a && std::find(extra.begin(), extra.end(), a) == extra.end()) {
        extra.push_back(a);
      }
    }
  }
  return extra;
}

Result<FetchedContent> accept_content(store::BlobStore& blobs, const Expected& expected, const std::string& url,
                                      std::string_view body, const std::string& content_type) {
  auto w = blobs.begin(digests_to_keep(expected));
  if (!w) {
    return tl::unexpected(w.error());
  }
  if (auto ok = w->write(body.data(), body.size()); !ok) {
    return tl::unexpected(ok.error());
  }
  if (auto why = not_as_announced(*w, expected, url)) {
    return make_error(ErrorKind::invalid_document, *why);
  }
  FetchedContent out;
  out.blob = w->seal();
  out.sealed.emplace(std::move(*w));
  out.served_from = url;
  if (!content_type.empty()) {
    out.type = content_type;
  }
  return out;
}

Result<FetchedContent> fetch_content(Fetcher& fetcher, store::BlobStore& blobs, const FetchOptions& options,
                                     const std::string& loc, const std::vector<rs::Link>& links,
                                     const Expected& expected, const HostPolicy& allowed,
                                     BlockingSemaphore* network_slots, bool defer_publish) {
  const std::vector<rs::HashAlgorithm> extra = digests_to_keep(expected);
  std::vector<std::string> reasons;
  bool all_missing = true;
  bool any_mismatch = false;
  // Whether another try soon could succeed: only a location that failed for
  // a passing reason (the network, 408, 429, 5xx) makes the whole a
  // transient failure, retried within the run. A body longer than listed,
  // a refused host or scheme, a 403 fail for now and go to the retry table.
  bool any_transient = false;
  for (const auto& url : candidate_locations(loc, links)) {
    auto parsed = parse_url(url);
    if (!parsed || (parsed->scheme != "http" && parsed->scheme != "https" && parsed->scheme != "file")) {
      reasons.push_back(url + ": not fetched (scheme)");
      all_missing = false;
      continue;
    }
    std::string why;
    if (allowed && !allowed(url, why)) {
      reasons.push_back(url + ": " + why);
      all_missing = false;
      continue;
    }
    auto writer = blobs.begin(extra);
    if (!writer) {
      return tl::unexpected(writer.error());
    }
    std::optional<store::BlobStore::Writer> w(std::move(*writer));
    Error write_error;
    bool write_failed = false;
    FetchOptions o = options;
    if (allowed) {
      // The same policy on every redirect hop: a location the document
      // names cannot redirect us to one it could not name.
      o.allow_url = [&allowed](const Url& u, std::string& reason) { return allowed(u.str(), reason); };
    }
    if (expected.length) {
      // Never accept (or download) more than was announced.
      o.max_body_bytes = std::min(o.max_body_bytes, *expected.length);
    }
    o.restart = [&] {
      w.reset();
      auto again = blobs.begin(extra);
      if (!again) {
        return false;
      }
      w.emplace(std::move(*again));
      return true;
    };
    if (network_slots) {
      network_slots->acquire();
    }
    auto r = fetcher.fetch(url, o, [&](const char* d, size_t n) {
      if (auto ok = w->write(d, n); !ok) {
        write_error = ok.error();
        write_failed = true;
        return false;
      }
      return true;
    });
    if (network_slots) {
      network_slots->release();
    }
    if (write_failed) {
      return tl::unexpected(write_error); // local disk trouble: no point trying elsewhere
    }
    if (!r) {
      reasons.push_back(r.error().message);
      all_missing = false;
      any_transient = any_transient || r.error().kind == ErrorKind::transient;
      continue;
    }
    if (r->status < 200 || r->status > 299) {
      reasons.push_back(http_status_words(r->status, url));
      if (r->status != 404 && r->status != 410) {
        all_missing = false;
      }
      any_transient = any_transient || is_retryable_status(r->status);
      continue;
    }
    all_missing = false;
    if (auto differs = not_as_announced(*w, expected, url)) {
      reasons.push_back(std::move(*differs));
      any_mismatch = true;
      continue;
    }
    FetchedContent out;
    if (defer_publish) {
      out.blob = w->seal();
      out.sealed.emplace(std::move(*w));
    } else {
      auto info = w->commit();
      if (!info) {
        return tl::unexpected(info.error());
      }
      out.blob = std::move(*info);
    }
    out.served_from = url;
    if (auto ct = r->header("content-type"); !ct.empty()) {
      out.type = ct;
    }
    return out;
  }
  std::string joined;
  for (const auto& r : reasons) {
    joined += (joined.empty() ? "" : "; ") + r;
  }
  ErrorKind kind = all_missing     ? ErrorKind::not_found
                   : any_mismatch  ? ErrorKind::invalid_document
                   : any_transient ? ErrorKind::transient
                                   : ErrorKind::permanent;
  return make_error(kind, joined.empty() ? "no location to fetch " + loc + " from" : joined);
}

} // namespace tributary::sync
