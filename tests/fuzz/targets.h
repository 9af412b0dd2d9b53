#pragma once

// The fuzz targets: each takes any bytes and must return without crashing,
// leaking, hanging or tripping a sanitizer. libFuzzer drives them from
// fuzz_main.cpp (a build with TRIBUTARY_FUZZ=ON, run by `bench/run.sh
// fuzz`); the unit tests run every saved input (tests/fuzz/corpus and
// tests/fuzz/regressions) through them on every build.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tributary::fuzz {

// A ResourceSync document (any capability, any root) through the streaming
// reader and the validator, in one buffer and in small pieces; what it
// reads, written again, must read back to the same entries.
int reader(const uint8_t* data, size_t size);
// A W3C datetime: what parses formats canonically and parses back equal.
int datetime(const uint8_t* data, size_t size);
// A dump package (ZIP + manifest.xml): opened and checked as a Resource
// Dump and as a Change Dump package; a package that passes has its
// bitstreams extracted and verified.
int package(const uint8_t* data, size_t size);
// A configuration file.
int config(const uint8_t* data, size_t size);
// What a client sends our HTTP server: request heads (pipelined), and the
// Range and date headers we parse.
int http_request(const uint8_t* data, size_t size);
// What a stranger sends our WebSub hub: a (un)subscription request's form
// body. The hub answers 202, 400, 429 or 503, never anything else, and
// queues nothing it refused.
int websub_request(const uint8_t* data, size_t size);
// What a hub POSTs to a subscription's callback: the notification body.
// Acknowledged (202) whatever it holds; never a crash, never a run for a
// body that is not a Change Notification newer than what was applied.
int notification(const uint8_t* data, size_t size);
// A hub's verification GET: the query. Confirmed (200, the challenge
// echoed) only for an intent of ours; anything else 4xx.
int verification_query(const uint8_t* data, size_t size);
// An OAI-PMH repository's answer (#36): ListRecords, ListIdentifiers or
// Identify. Never a crash; every record kept has an identifier, and a
// record's metadata parses as XML on its own.
int oai_page(const uint8_t* data, size_t size);
// What an upstream answers pipelined GETs with (#38): response heads and
// chunked bodies as the pipelined fetcher reads them, in one buffer and
// cut short at every length; never a crash, and what is read stays within
// what was given.
int http_response(const uint8_t* data, size_t size);

// An IIIF Change Discovery stream's answers (#36): the OrderedCollection
// and an OrderedCollectionPage. Never a crash; every activity kept has an
// object (a Refresh aside), a Move a target, and a known type.
int iiif(const uint8_t* data, size_t size);
// A robots.txt (#41): its Sitemap lines and its Crawl-delay. Never a crash;
// every Sitemap URL named is absolute http(s); a Crawl-delay is finite,
// not negative, and within our cap.
int robots(const uint8_t* data, size_t size);

// Our XML scanner (#54) against libxml2, the parser it replaced: the same
// verdict on well-formedness and, for a well-formed document, the same
// elements, attributes and text; and the same reading whole and in pieces.
int xml_scanner(const uint8_t* data, size_t size);

// The target named `name` ("reader", "datetime", ...); null if none.
using Target = int (*)(const uint8_t*, size_t);
Target target(std::string_view name);

} // namespace tributary::fuzz
