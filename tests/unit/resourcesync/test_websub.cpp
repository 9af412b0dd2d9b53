// WebSub's pieces without I/O: the form of a subscription request, the
// content signature (against a value computed independently, with
// `openssl dgst -sha256 -hmac`), and the Link header.
#include "resourcesync/websub.h"

#include <doctest/doctest.h>

using namespace tributary::rs::websub;

TEST_CASE("WebSub: a subscription form is decoded as browsers and hubs encode it") {
  auto f = parse_form("hub.mode=subscribe&hub.topic=http%3A%2F%2Fa.example%2Fsets%2Fx&hub.callback=http://b.example/cb?x=1"
                      "&hub.secret=two+words&empty=&hub.mode=unsubscribe");
  REQUIRE(f);
  CHECK(f->at("hub.mode") == "subscribe"); // the first of a repeated name
  CHECK(f->at("hub.topic") == "http://a.example/sets/x");
  CHECK(f->at("hub.callback") == "http://b.example/cb?x=1");
  CHECK(f->at("hub.secret") == "two words");
  CHECK(f->at("empty").empty());
  CHECK_FALSE(parse_form("hub.mode=%zz"));
  auto round = parse_form(encode_form({{"hub.topic", "http://a/b?c=d&e=f"}, {"k", "a b+c"}}));
  REQUIRE(round);
  CHECK(round->at("hub.topic") == "http://a/b?c=d&e=f");
  CHECK(round->at("k") == "a b+c");
}

TEST_CASE("WebSub: X-Hub-Signature is HMAC-SHA256 of the body, and only the matching one is valid") {
  // printf 'hello' | openssl dgst -sha256 -hmac key
  const std::string want = "sha256=9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b";
  CHECK(signature("key", "hello") == want);
  CHECK(check_signature(&want, "key", "hello") == SignatureCheck::valid);
  const std::string upper = "sha256=9307B3B915EFB5171FF14D8CB55FBCC798C6C0EF1456D66DED1A6AA723A58B7B";
  CHECK(check_signature(&upper, "key", "hello") == SignatureCheck::valid);
  CHECK(check_signature(&want, "key", "hello!") == SignatureCheck::mismatch);
  CHECK(check_signature(&want, "other", "hello") == SignatureCheck::mismatch);
  CHECK(check_signature(nullptr, "key", "hello") == SignatureCheck::missing);
  const std::string md5 = "md5=5d41402abc4b2a76b9719d911017c592";
  CHECK(check_signature(&md5, "key", "hello") == SignatureCheck::malformed);
  const std::string bare = "9307b3b9";
  CHECK(check_signature(&bare, "key", "hello") == SignatureCheck::malformed);
  // printf 'hello' | openssl dgst -sha1 -hmac key
  const std::string sha1 = "sha1=b34ceac4516ff23a143e61d79d0fa7a4fbe5f266";
  CHECK(check_signature(&sha1, "key", "hello") == SignatureCheck::valid);
}

TEST_CASE("WebSub: the Link header names the hub and the topic, and random tokens differ") {
  CHECK(link_header("http://h/hub", "http://h/t") == "<http://h/hub>; rel=\"hub\", <http://h/t>; rel=\"self\"");
  const auto a = random_hex(16);
  CHECK(a.size() == 32);
  CHECK(a != random_hex(16));
}
