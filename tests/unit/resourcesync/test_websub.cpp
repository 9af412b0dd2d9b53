#include "resourcesync/websub.h"

#include <doctest/doctest.h>

using namespace tributary::rs;

TEST_CASE("websub: a callback is shown by its origin and a short hash, never its path, query or userinfo") {
  const std::string with_token = "https://b.example.org:8443/push/0123456789abcdef0123456789abcdef?x=1";
  const std::string label = websub::callback_label(with_token);
  CHECK(label.rfind("https://b.example.org:8443 #", 0) == 0);
  CHECK(label.size() == std::string("https://b.example.org:8443 #").size() + 8);
  CHECK(label.find("0123456789abcdef") == std::string::npos);
  // Two callbacks of one origin still tell apart.
  CHECK(websub::callback_label("https://b.example.org:8443/push/other") != label);
  CHECK(websub::callback_label("http://user:secret@c.example/cb") .rfind("http://c.example #", 0) == 0);
  CHECK(websub::callback_label("not a url").rfind("(not a URL) #", 0) == 0);
}
