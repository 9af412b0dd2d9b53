#include "resourcesync/hash.h"

#include <doctest/doctest.h>

using namespace tributary::rs;

TEST_CASE("Hasher: standard test vectors") {
  struct Case {
    HashAlgorithm alg;
    const char* input;
    const char* hex;
  };
  const Case cases[] = {
      {HashAlgorithm::md5, "", "d41d8cd98f00b204e9800998ecf8427e"},
      {HashAlgorithm::md5, "abc", "900150983cd24fb0d6963f7d28e17f72"},
      {HashAlgorithm::sha1, "", "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
      {HashAlgorithm::sha1, "abc", "a9993e364706816aba3e25717850c26c9cd0d89d"},
      {HashAlgorithm::sha256, "", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
      {HashAlgorithm::sha256, "abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
      {HashAlgorithm::sha256, "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.input);
    CHECK(hash_hex(c.alg, c.input) == c.hex);
  }
}

TEST_CASE("Hasher: streaming in pieces equals one shot, and the hasher resets") {
  std::string data(1'000'003, 'x');
  for (size_t i = 0; i < data.size(); ++i) {
    data[i] = static_cast<char>('a' + i % 26);
  }
  Hasher h(HashAlgorithm::sha256);
  for (size_t off = 0; off < data.size(); off += 4093) {
    h.update(std::string_view(data).substr(off, 4093));
  }
  CHECK(h.finish_hex() == hash_hex(HashAlgorithm::sha256, data));
  h.update("abc");
  CHECK(h.finish_hex() == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

  MultiHasher m({HashAlgorithm::md5, HashAlgorithm::sha1});
  m.update("abc", 3);
  auto v = m.finish();
  REQUIRE(v.size() == 2);
  CHECK(v[0] == HashValue{"md5", "900150983cd24fb0d6963f7d28e17f72"});
  CHECK(v[1] == HashValue{"sha-1", "a9993e364706816aba3e25717850c26c9cd0d89d"});
}

TEST_CASE("parse_hash_list: whitespace-separated tokens") {
  auto r = parse_hash_list(" md5:1E0D5CB8EF6BA40C99B14C0237BE735E\n sha-256:854f61290e2e197a11bc91063afce22e43f8ccc655237050ace766adc68dc784 ");
  REQUIRE(r.values.size() == 2);
  CHECK(r.values[0].algorithm == "md5");
  CHECK(r.values[0].hex == "1e0d5cb8ef6ba40c99b14c0237be735e"); // lower-cased
  CHECK(r.values[1].known() == HashAlgorithm::sha256);
  CHECK(r.warnings.empty());
  CHECK(r.errors.empty());
  CHECK(format_hash_list(r.values) ==
        "md5:1e0d5cb8ef6ba40c99b14c0237be735e sha-256:854f61290e2e197a11bc91063afce22e43f8ccc655237050ace766adc68dc784");
  CHECK(strongest_hash(r.values)->algorithm == "sha-256");
}

TEST_CASE("parse_hash_list: an unknown algorithm is ignored with a warning, and the known ones kept") {
  auto r = parse_hash_list("sha-512:abcdef md5:1e0d5cb8ef6ba40c99b14c0237be735e");
  REQUIRE(r.values.size() == 1);
  CHECK(r.values[0].algorithm == "md5");
  REQUIRE(r.warnings.size() == 1);
  CHECK(r.warnings[0] == "unknown hash algorithm 'sha-512' (ignored, not verified)");
  CHECK(r.errors.empty());
}

TEST_CASE("parse_hash_list: base64 and base64url digests of the algorithm's length are read as hex") {
  // md5("abc") = 900150983cd24fb0d6963f7d28e17f72; base64 kAFQmDzST7DWlj99KOF/cg==
  auto b64 = parse_hash_list("md5:kAFQmDzST7DWlj99KOF/cg==");
  REQUIRE(b64.values.size() == 1);
  CHECK(b64.values[0].hex == "900150983cd24fb0d6963f7d28e17f72");
  CHECK(b64.errors.empty());
  REQUIRE(b64.warnings.size() == 1);
  CHECK(b64.warnings[0].find("is base64, not hex") != std::string::npos);
  // sha-256("abc"), base64url without padding (spec example 27's form).
  auto url = parse_hash_list("SHA-256:ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
  REQUIRE(url.values.size() == 1);
  CHECK(url.values[0].algorithm == "sha-256");
  CHECK(url.values[0].hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(url.warnings.size() == 2); // the token's case, and base64url
  // The 2015 simulator's form: base64 with padding.
  auto sim = parse_hash_list("md5:Yx8m6CqWBJjKT5VBggoWeQ==");
  REQUIRE(sim.values.size() == 1);
  CHECK(sim.values[0].hex == "631f26e82a960498ca4f9541820a1679");
  // Aliases real writers use.
  auto alias = parse_hash_list("sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  REQUIRE(alias.values.size() == 1);
  CHECK(alias.values[0].algorithm == "sha-256");
}

TEST_CASE("parse_hash_list: a value that cannot be used costs that value, not the others") {
  struct Case {
    const char* in;
    const char* message;
  };
  const Case cases[] = {
      {"1e0d5cb8ef6ba40c99b14c0237be735e", "lacks an algorithm token"},
      {":1e0d", "lacks an algorithm token"},
      {"md5:", "has no digest"},
      {"md5:1e0d5cb8", "md5 needs 32 hex digits (or its base64), got 8"},
      {"sha-1:1e0d5cb8ef6ba40c99b14c0237be735e", "sha-1 needs 40 hex digits (or its base64), got 32"},
      {"md5:1e0d5cb8ef6ba40c99b14c0237be735e md5:00000000000000000000000000000000", "given twice with different"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    auto r = parse_hash_list(std::string(c.in) + " sha-1:a9993e364706816aba3e25717850c26c9cd0d89d");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].find(c.message) != std::string::npos);
    REQUIRE(r.values.size() == 1); // the good one is kept
    CHECK(r.values[0].algorithm == "sha-1");
  }
  auto same = parse_hash_list("md5:1e0d5cb8ef6ba40c99b14c0237be735e md5:1E0D5CB8EF6BA40C99B14C0237BE735E");
  CHECK(same.values.size() == 1);
  CHECK(same.errors.empty());
  auto empty = parse_hash_list("   ");
  CHECK(empty.values.empty());
  CHECK(empty.warnings.size() == 1);
}

TEST_CASE("hashes_match: compares common algorithms only") {
  std::vector<HashValue> expected{{"md5", "900150983cd24fb0d6963f7d28e17f72"},
                                  {"sha-256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}};
  std::vector<HashValue> good{{"sha-256", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"}};
  std::vector<HashValue> bad{{"md5", "00000000000000000000000000000000"}};
  std::vector<HashValue> none{{"sha-1", "a9993e364706816aba3e25717850c26c9cd0d89d"}};
  std::string why;
  CHECK(hashes_match(expected, good));
  CHECK_FALSE(hashes_match(expected, bad, &why));
  CHECK(why == "md5: expected 900150983cd24fb0d6963f7d28e17f72, got 00000000000000000000000000000000");
  CHECK_FALSE(hashes_match(expected, none, &why));
  CHECK(why == "no algorithm in common");
}

TEST_CASE("parse_hash_list: one canonical value (the fast path) reads as the general path reads it") {
  // The general path takes the same value with a space before it.
  for (const char* v : {"md5:1e0d5cb8ef6ba40c99b14c0237be735e", "sha-1:da39a3ee5e6b4b0d3255bfef95601890afd80709",
                        "sha-256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                        "md5:1E0D5CB8EF6BA40C99B14C0237BE735E", "md5:1e0d", "md5:1e0d5cb8ef6ba40c99b14c0237be735g",
                        "MD5:1e0d5cb8ef6ba40c99b14c0237be735e", "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}) {
    CAPTURE(v);
    const auto fast = parse_hash_list(v);
    const auto general = parse_hash_list(std::string(" ") + v);
    CHECK(fast.values == general.values);
    CHECK(fast.errors == general.errors);
    CHECK(fast.warnings == general.warnings);
  }
}
