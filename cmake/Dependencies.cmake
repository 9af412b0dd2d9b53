# Every third-party library is normalised here to one alias target
# (dep::<name>), so module CMake files never change when packaging does.
# How each Debian package is found is recorded in ../shared/BUILD-NOTES.md.
find_package(PkgConfig REQUIRED)

function(tributary_alias alias target)
  if(NOT TARGET ${alias})
    add_library(${alias} INTERFACE IMPORTED GLOBAL)
    target_link_libraries(${alias} INTERFACE ${target})
  endif()
endfunction()

find_package(LibXml2 REQUIRED)
tributary_alias(dep::libxml2 LibXml2::LibXml2)

find_package(ZLIB REQUIRED)
tributary_alias(dep::zlib ZLIB::ZLIB)

# libdeflate: whole documents gzipped at once (our closed Change List parts,
# indexes) and dump manifests deflated at once, faster than zlib and smaller
# at the same level. zlib stays for what is compressed or inflated as a
# stream.
pkg_check_modules(LIBDEFLATE REQUIRED IMPORTED_TARGET libdeflate)
tributary_alias(dep::deflate PkgConfig::LIBDEFLATE)

find_package(OpenSSL 3.0 REQUIRED)
tributary_alias(dep::crypto OpenSSL::Crypto)
tributary_alias(dep::ssl OpenSSL::SSL)

find_package(tl-expected CONFIG REQUIRED)
tributary_alias(dep::expected tl::expected)

find_package(nlohmann_json 3.11 CONFIG REQUIRED)
tributary_alias(dep::json nlohmann_json::nlohmann_json)

# libzip: through pkg-config (its CMake config needs zipcmp/zipmerge/ziptool).
pkg_check_modules(LIBZIP REQUIRED IMPORTED_TARGET libzip)
tributary_alias(dep::zip PkgConfig::LIBZIP)

# libpsl: the Public Suffix List, for quotas per registrable domain (the
# list changes monthly; a hand-kept copy would be wrong within weeks).
pkg_check_modules(PSL REQUIRED IMPORTED_TARGET libpsl)
tributary_alias(dep::psl PkgConfig::PSL)

# libidn2: IDNA2008/UTS 46 host names, so that a hub quota counts
# "bücher.example" and "xn--bcher-kva.example" as one host.
pkg_check_modules(IDN2 REQUIRED IMPORTED_TARGET libidn2)
tributary_alias(dep::idn2 PkgConfig::IDN2)

# RE2: linear-time regular expressions (URI filters).
pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
tributary_alias(dep::re2 PkgConfig::RE2)

# LMDB: the blob store's index (sha-256 -> pack file, offset, length).
pkg_check_modules(LMDB REQUIRED IMPORTED_TARGET lmdb)
tributary_alias(dep::lmdb PkgConfig::LMDB)

# libcurl: the S3 content tier's client. It signs AWS SigV4 itself
# (CURLOPT_AWS_SIGV4, 7.75+), so no signing code of ours.
pkg_check_modules(CURL REQUIRED IMPORTED_TARGET libcurl>=7.75)
tributary_alias(dep::curl PkgConfig::CURL)

find_package(CLI11 CONFIG REQUIRED)
tributary_alias(dep::cli11 CLI11::CLI11)

# cpp-httplib is a compiled library in Debian: every file that includes
# httplib.h must see the same CPPHTTPLIB_* definitions as the library was
# built with, or class layouts differ. The pkg-config target carries them.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
tributary_alias(dep::httplib "PkgConfig::HTTPLIB;OpenSSL::SSL;OpenSSL::Crypto;ZLIB::ZLIB")

# libpqxx 6.4's .pc does not link libpq.
find_package(PostgreSQL REQUIRED)
pkg_check_modules(PQXX REQUIRED IMPORTED_TARGET libpqxx)
tributary_alias(dep::pqxx "PkgConfig::PQXX;PostgreSQL::PostgreSQL")

# RFC 3986 reference resolution (relative links in HTML, Link headers,
# redirects, well-known locations).
find_package(uriparser CONFIG REQUIRED)
tributary_alias(dep::uriparser uriparser::uriparser)

find_package(Threads REQUIRED)
tributary_alias(dep::threads Threads::Threads)

if(TRIBUTARY_BUILD_TESTS)
  find_package(doctest CONFIG REQUIRED)
  tributary_alias(dep::doctest doctest::doctest)
endif()
