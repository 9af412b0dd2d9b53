#!/usr/bin/env bash
# Installs every Debian package Tributary needs to build, test and run.
# Idempotent and non-interactive: packages already present are skipped, so
# re-running it costs one dpkg query. Needs root (or sudo) only when
# something is missing.
set -euo pipefail

packages=(
  # toolchain
  g++ cmake ninja-build pkg-config make
  # OAI-PMH pages and the XML scanner's fuzz oracle (libxml2), gzip (zlib), hashes (OpenSSL)
  libxml2-dev zlib1g-dev libssl-dev
  # gzip of whole documents we publish (faster than zlib, and smaller)
  libdeflate-dev
  # HTTP client and server (Debian builds it as a shared library with
  # OpenSSL, zlib and brotli; its headers need the brotli headers too)
  libcpp-httplib-dev libbrotli-dev
  # ZIP packages for Resource/Change Dumps; libzip's CMake config wants
  # its command-line tools present, so install them too
  libzip-dev zipcmp zipmerge ziptool
  # blob index: sha-256 -> place in a pack file (LMDB, memory-mapped B+tree)
  liblmdb-dev
  # storage
  libpq-dev libpqxx-dev postgresql-15 postgresql-client-15
  # PgBouncer in transaction mode, in front of three nodes in the
  # connection-budget test (tests/integration/pg_budget_cluster.sh)
  pgbouncer
  # the S3 content tier's client (libcurl signs AWS SigV4 itself), and a
  # real S3 server for its tests: a throwaway single-node Ceph cluster
  # serving S3 through the RADOS Gateway (deploy/lib/rgw-temp.sh)
  libcurl4-openssl-dev radosgw ceph-mon ceph-osd ceph-common uuid-runtime
  # RFC 3986 reference resolution
  liburiparser-dev
  # the Public Suffix List (quotas per registrable domain) and its data
  libpsl-dev publicsuffix
  # IDNA host names (one hub quota per host, however it is spelled)
  libidn2-dev
  # linear-time regular expressions for the include/exclude filters
  libre2-dev
  # fuzzing (bench/run.sh fuzz): libFuzzer with ASan and UBSan
  clang-14 libfuzzer-14-dev
  # config and JSON output, error values, CLI, tests
  nlohmann-json3-dev libexpected-dev libcli11-dev doctest-dev
  # used by the test script; python3 writes a ZIP the way Python's zipfile
  # does (py-resync's dumps), and the benchmarks' static Sources; the
  # modules py-resync's client needs, for the crash matrix's --py-resync
  procps iproute2 ca-certificates openssl python3
  python3-requests python3-dateutil python3-defusedxml
  # JSON Schema validation: the tests check docs/config.schema.json and the
  # status API's answers against docs/openapi.json with it
  python3-jsonschema
  # the status page's end-to-end test renders it in headless Chromium, and
  # clicks its action buttons over the DevTools protocol (python3-websocket)
  chromium python3-websocket
  # promtool (Prometheus's own checker) lints /metrics and checks and
  # unit-tests deploy/monitoring's alert rules in the tests; Debian ships it
  # in the prometheus package, whose service policy-rc.d may leave stopped
  prometheus
  # groff renders the man page (docs/man/tributary.1) in its test
  groff-base
  # used by the benchmarks (bench/run.sh serve; GNU time for peak RSS)
  wrk nginx-light curl time
  # an OAI-PMH provider and harvester this project did not write
  # (bench/oai/catmandu/check.sh; the oai bench's Perl harvester), and the
  # harvesters that follow our own OAI-PMH face in its tests (HTTP::OAI's
  # oai_pmh, Catmandu's OAI importer); xmllint validates its answers
  # against the vendored schemas (tests/data/oai-schemas)
  libdancer-plugin-catmandu-oai-perl libcatmandu-perl libhttp-oai-perl
  libcatmandu-oai-perl libxml2-utils
)
# npm, for the third harvester of those tests (npm's oai-pmh, installed
# pinned by deploy/install-npm-tools.sh): Debian's, unless an npm is there
# already (a Node.js from NodeSource carries its own, and conflicts with
# Debian's npm package).
if ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
