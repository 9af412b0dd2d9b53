// GrowingText: the open Change List part's text, gzip copy and digest kept
// as it grows; every version must be what compressing and hashing it whole
// would give.
#include "resourcesync/growing_text.h"
#include "resourcesync/hash.h"

#include "test_support.h"

#include <doctest/doctest.h>

#include <random>

using namespace tributary;

TEST_CASE("GrowingText: each version with its tail is the text, a whole gzip member of it and its SHA-256, and "
          "the text grows on without the tail") {
  std::mt19937 rng(7);
  rs::GrowingText g(1);
  std::string expected = "<urlset>\n";
  g.append(expected);
  const std::string tail = "</urlset>\n";
  for (int round = 0; round < 40; ++round) {
    // Appends of every size, from none to past the compressor's buffers,
    // of text that compresses and text that does not.
    const size_t n = round % 7 == 0 ? 0 : std::uniform_int_distribution<size_t>(1, round % 5 == 0 ? 300000 : 900)(rng);
    std::string piece;
    for (size_t i = 0; i < n; ++i) {
      piece.push_back(round % 3 == 0 ? static_cast<char>(rng()) : "<url><loc>https://a.example/</loc></url>\n"[i % 41]);
    }
    g.append(piece);
    expected += piece;
    CHECK(g.text() == expected);
    const auto v = g.with_tail(tail);
    CAPTURE(round);
    CHECK(v.text == expected + tail);
    CHECK(v.sha256_hex == rs::hash_hex(rs::HashAlgorithm::sha256, expected + tail));
    const auto plain = test::gunzip(v.gzipped);
    REQUIRE(plain);
    CHECK(*plain == expected + tail);
  }
  // An empty tail, and a moved text.
  rs::GrowingText moved = std::move(g);
  const auto v = moved.with_tail("");
  CHECK(v.sha256_hex == rs::hash_hex(rs::HashAlgorithm::sha256, expected));
  CHECK(test::gunzip(v.gzipped).value_or("") == expected);
}

TEST_CASE("Hasher::peek_hex: the digest with a tail, the hasher going on as before") {
  rs::Hasher h(rs::HashAlgorithm::sha256);
  h.update(std::string_view("abc"));
  CHECK(h.peek_hex("def") == rs::hash_hex(rs::HashAlgorithm::sha256, "abcdef"));
  CHECK(h.peek_hex() == rs::hash_hex(rs::HashAlgorithm::sha256, "abc"));
  h.update(std::string_view("xyz"));
  CHECK(h.finish_hex() == rs::hash_hex(rs::HashAlgorithm::sha256, "abcxyz"));
}

TEST_CASE("GrowingText: versions asked for now and then, with many appends between them, across the compressor's "
          "start") {
  // The compressor and the digest take what was appended only when a
  // version is asked for: whatever came between two versions (a little, or
  // past the size where the compressor starts, or nothing) must be in the
  // next one, compressed and hashed once.
  std::mt19937 rng(11);
  for (const size_t every : {1u, 3u, 50u}) {
    CAPTURE(every);
    rs::GrowingText g(1);
    std::string expected;
    for (int round = 0; round < 300; ++round) {
      std::string piece;
      const size_t n = std::uniform_int_distribution<size_t>(0, round % 40 == 0 ? 200000 : 3000)(rng);
      for (size_t i = 0; i < n; ++i) {
        piece.push_back(round % 4 == 0 ? static_cast<char>(rng()) : "<url><loc>https://b.example/</loc></url>\n"[i % 41]);
      }
      g.append(piece);
      expected += piece;
      if (round % every != 0) {
        continue;
      }
      CAPTURE(round);
      const auto v = g.with_tail("</urlset>");
      CHECK(v.text == expected + "</urlset>");
      CHECK(v.sha256_hex == rs::hash_hex(rs::HashAlgorithm::sha256, expected + "</urlset>"));
      CHECK(test::gunzip(v.gzipped).value_or("") == expected + "</urlset>");
      // Asked again with nothing added, the same version.
      CHECK(g.with_tail("</urlset>").sha256_hex == v.sha256_hex);
    }
    CHECK(expected.size() > 256 * 1024); // the compressor started on the way
  }
}
