#include "common/url_resolve.h"

#include <uriparser/Uri.h>

#include <vector>

namespace tributary {

Result<std::string> resolve_reference(std::string_view base, std::string_view reference) {
  const std::string b(base);
  const std::string r(reference);
  UriUriA base_uri;
  UriUriA ref_uri;
  UriUriA out;
  const char* error_pos = nullptr;
  if (uriParseSingleUriA(&base_uri, b.c_str(), &error_pos) != URI_SUCCESS) {
    return make_error(ErrorKind::invalid_document, "'" + b + "' is not a valid URI");
  }
  if (uriParseSingleUriA(&ref_uri, r.c_str(), &error_pos) != URI_SUCCESS) {
    uriFreeUriMembersA(&base_uri);
    return make_error(ErrorKind::invalid_document, "'" + r + "' is not a valid URI reference");
  }
  int rc = uriAddBaseUriA(&out, &ref_uri, &base_uri);
  Result<std::string> result = make_error(ErrorKind::invalid_document,
                                          "cannot resolve '" + r + "' against '" + b + "'");
  if (rc == URI_SUCCESS) {
    int chars = 0;
    if (uriToStringCharsRequiredA(&out, &chars) == URI_SUCCESS) {
      std::vector<char> buf(static_cast<size_t>(chars) + 1);
      if (uriToStringA(buf.data(), &out, chars + 1, nullptr) == URI_SUCCESS) {
        result = std::string(buf.data());
      }
    }
    uriFreeUriMembersA(&out);
  }
  uriFreeUriMembersA(&ref_uri);
  uriFreeUriMembersA(&base_uri);
  return result;
}

} // namespace tributary
