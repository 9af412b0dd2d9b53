#!/usr/bin/env bash
# Builds the benchmarks optimised (build/bench) and prints their figures.
#   bench/run.sh            # all benchmarks
#   bench/run.sh parse      # one of them (parse, sync, wan, listonly, dump, package, serve, daemon, publish, chain, push, flood, oai, oai-serve, iiif, crash, history, fuzz, load, scale, many, retention, s3)
#   BENCH_SCALE_RESOURCES=100000 bench/run.sh scale   # a smaller scale run
#   FUZZ_SECONDS=600 bench/run.sh fuzz   # each libFuzzer target for 10 min (default 120 s)
#   FUZZ_TARGETS="reader oai_page" bench/run.sh fuzz   # only these targets
#   TMPDIR=/dev/shm bench/run.sh sync   # blobs on tmpfs: the engine without this disk
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/deploy/install-deps.sh" >/dev/null
which=${1:-all}
if [ "$which" != fuzz ]; then
  cmake -S "$root" -B "$root/build/bench" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF >/dev/null
  cmake --build "$root/build/bench" -j "$(nproc)" >/dev/null
fi
echo "machine: $(nproc) cores, $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -r)"
status=0
if [ "$which" = all ] || [ "$which" = parse ]; then
  echo "== bench/parse"
  parse_dir=$(mktemp -d /tmp/tributary-bench-parse.XXXXXX)
  "$root/build/bench/bench/bench_parse" --dir "$parse_dir" || status=1
  bash "$root/bench/parse_whole.sh" "$root" "$parse_dir/changelist-50k.xml" || status=1
  rm -rf "$parse_dir"
fi
if [ "$which" = all ] || [ "$which" = sync ]; then
  echo "== bench/sync (PostgreSQL 15 with default durability; blobs under ${TMPDIR:-/tmp})"
  source "$root/deploy/lib/pg-temp.sh"
  pg_temp_start
  "$root/build/bench/bench/bench_sync" --pg "$PG_TEMP_CONNINFO" || status=1
  # The same engine as a new user runs it: `tributary sync` with a config
  # that names the source and nothing else (every default, the adaptive
  # host throttle included), against a static Source served by nginx.
  bash "$root/bench/nginx_sources.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
  # Politeness that finds a server's limit (#38): 150 requests/s or 4 at once.
  bash "$root/bench/polite.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
  # PY_RESYNC=<a checkout of resync/resync>: the reference client's baseline
  # of the same 10,000 x 1 KB, alternated with ours, five runs each.
  if [ -n "${PY_RESYNC:-}" ]; then
    bash "$root/bench/vs_pyresync.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
  fi
fi
if [ "$which" = all ] || [ "$which" = wan ]; then
  echo "== bench/wan (a Source 50 ms away through tools/delay_proxy.py; default config; PY_RESYNC adds the reference client)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/wan.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = listonly ]; then
  echo "== bench/listonly (tributary run, default config but interval 10 s, following a Resource-List-only Source of ${BENCH_LISTONLY_RESOURCES:-1000000} resources behind nginx)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/listonly.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = dump ]; then
  echo "== bench/dump (PostgreSQL 15 with default durability; blobs under ${TMPDIR:-/tmp})"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  "$root/build/bench/bench/bench_sync" --pg "$PG_TEMP_CONNINFO" --dump || status=1
fi
if [ "$which" = all ] || [ "$which" = dump ] || [ "$which" = package ]; then
  echo "== bench/package (one Change Dump package of 10,000 x 256 B written, as the dump builder writes them)"
  "$root/build/bench/bench/bench_package" || status=1
  echo "== bench/locate (an index of a million built 2,500 names a transaction, its merges included; 2,500 new names added to it in one transaction; a package's 10,000 bitstreams located in it, one by one and at once; a writer's question for new content)"
  "$root/build/bench/bench/bench_locate" || status=1
fi
if [ "$which" = all ] || [ "$which" = serve ]; then
  echo "== bench/serve (wrk -t2 -c32, five 5 s runs a side alternated, medians; tributary serve against nginx, same bytes, both on loopback)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  work=$(mktemp -d /tmp/tributary-bench-serve.XXXXXX)
  ours_port=18480
  nginx_port=18481
  psql "$PG_TEMP_CONNINFO" -qc "CREATE DATABASE bench_serve" >/dev/null
  db="$PG_TEMP_CONNINFO dbname=bench_serve"
  cat >"$work/config.json" <<CFG
{"database": "$db", "data_dir": "$work/data", "listen": "127.0.0.1:$ours_port", "change_list_part_size": 50000}
CFG
  bin="$root/build/bench/aggregator/tributary"
  "$bin" migrate --config "$work/config.json" >/dev/null
  original=$("$root/build/bench/bench/bench_serve_populate" --pg "$db" --data "$work/data")
  "$bin" serve --config "$work/config.json" >"$work/serve.log" 2>&1 &
  serve_pid=$!
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$ours_port/robots.txt" && break; sleep 0.1; done
  enc=$(printf '%s' "$original" | od -An -tx1 | tr -d ' \n' | sed 's/../%&/g' | tr 'a-f' 'A-F')
  cl="/sets/bench/changelist-1.xml"
  rl="/sets/bench/resourcelist.xml"
  obj="/sets/bench/resources/$enc"
  mkdir -p "$work/www"
  curl -sf -o "$work/www/changelist-1.xml" "http://127.0.0.1:$ours_port$cl"
  # Our Resource List may be an index of parts: its first part is then the
  # document measured (what a Destination's baseline reads).
  index=$(curl -sf "http://127.0.0.1:$ours_port$rl")
  if printf '%s' "$index" | grep -q '<sitemapindex'; then
    rl=$(printf '%s' "$index" | grep -o '<loc>[^<]*</loc>' | head -1 | sed 's|<loc>http://[^/]*||; s|</loc>||')
  fi
  curl -sf -o "$work/www/resourcelist.xml" "http://127.0.0.1:$ours_port$rl"
  curl -sf -o "$work/www/object" "http://127.0.0.1:$ours_port$obj"
  entries=$(grep -c '<url>' "$work/www/changelist-1.xml")
  source "$root/bench/nginx.sh"
  nginx_start "$work" "server { listen 127.0.0.1:$nginx_port; root $work/www; }"
  # wrk shares the 2 cores with the server it measures, so one 10 s run
  # swings by several percent: each side runs five times 5 s, alternated,
  # and the medians are compared (every run is printed).
  rate() { wrk -t2 -c32 -d5s "$1" | awk '/Requests\/sec/ {print int($2)}'; }
  median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
  alternate() { # what ours_url nginx_url -> sets $ours_med and $nginx_med
    local o=() n=() i
    for i in 1 2 3 4 5; do
      o+=("$(rate "$2")")
      n+=("$(rate "$3")")
    done
    echo "  $1 runs (req/s): tributary ${o[*]}; nginx ${n[*]}"
    ours_med=$(median "${o[@]}")
    nginx_med=$(median "${n[@]}")
  }
  alternate "Change List part" "http://127.0.0.1:$ours_port$cl" "http://127.0.0.1:$nginx_port/changelist-1.xml"
  ours_cl=$ours_med nginx_cl=$nginx_med
  alternate "Resource List" "http://127.0.0.1:$ours_port$rl" "http://127.0.0.1:$nginx_port/resourcelist.xml"
  ours_rl=$ours_med nginx_rl=$nginx_med
  alternate "content object" "http://127.0.0.1:$ours_port$obj" "http://127.0.0.1:$nginx_port/object"
  ours_obj=$ours_med nginx_obj=$nginx_med
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  nginx_stop "$work"
  report() {
    awk -v what="$1" -v ours="$2" -v ngx="$3" 'BEGIN {
      r = ngx > 0 ? ours / ngx : 0;
      printf "%-44s tributary %8d req/s   nginx %8d req/s (medians)   ratio %.2f  [target >= 1.0: %s]\n", what, ours, ngx, r, (r >= 1.0 ? "PASS" : "FAIL") }'
  }
  report "Change List part ($entries entries, $(stat -c %s "$work/www/changelist-1.xml") B)" "$ours_cl" "$nginx_cl"
  report "Resource List ($(grep -c '<url>' "$work/www/resourcelist.xml") entries, $(stat -c %s "$work/www/resourcelist.xml") B)" "$ours_rl" "$nginx_rl"
  report "content object ($(stat -c %s "$work/www/object") B)" "$ours_obj" "$nginx_obj"
  awk -v a="$ours_cl" -v b="$nginx_cl" -v c="$ours_obj" -v d="$nginx_obj" -v e="$ours_rl" -v f="$nginx_rl" \
    'BEGIN { exit !(a >= b && c >= d && e >= f) }' || status=1
  rm -rf "$work"
fi
if [ "$which" = all ] || [ "$which" = daemon ]; then
  # `tributary run` following 10 simulated Sources of 10,000 resources each
  # (each changing once a second, followed every second): propagation delay
  # of upstream changes into our change log (recorded_at - upstream datetime,
  # which our documents show at once) and the daemon's resident memory.
  echo "== bench/daemon (tributary run following 10 x tributary simulate, 10,000 resources each)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  work=$(mktemp -d /tmp/tributary-bench-daemon.XXXXXX)
  psql "$PG_TEMP_CONNINFO" -qc "CREATE DATABASE bench_daemon" >/dev/null
  db="$PG_TEMP_CONNINFO dbname=bench_daemon"
  bin="$root/build/bench/aggregator/tributary"
  pids=()
  sources=""
  for i in $(seq 0 9); do
    port=$((18500 + i))
    "$bin" simulate --listen "127.0.0.1:$port" --resources 10000 --change-rate 1 --seed "$i" >/dev/null 2>&1 &
    pids+=($!)
    sources+="${sources:+,}{\"name\": \"sim$i\", \"url\": \"http://127.0.0.1:$port/\", \"interval\": \"1s\"}"
  done
  cat >"$work/config.json" <<CFG
{"database": "$db", "data_dir": "$work/data", "listen": "127.0.0.1:18499", "max_concurrent_syncs": 4, "sources": [$sources]}
CFG
  "$bin" migrate --config "$work/config.json" >/dev/null
  started=$(date +%s)
  "$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
  daemon=$!
  # In sync: every source has a successful run.
  until [ "$(psql "$db" -Atc "SELECT count(DISTINCT source_id) FROM sync_run WHERE status = 'succeeded'")" = 10 ]; do
    sleep 0.5
  done
  insync=$(($(date +%s) - started))
  t0=$(psql "$db" -Atc "SELECT now()")
  sleep "${BENCH_DAEMON_SECONDS:-60}"
  rss_kib=$(awk '/VmRSS/{print $2}' "/proc/$daemon/status")
  hwm_kib=$(awk '/VmHWM/{print $2}' "/proc/$daemon/status")
  psql "$db" -At -F ' ' -c "SELECT count(*), round(percentile_cont(0.5) WITHIN GROUP (ORDER BY d)::numeric, 3),
      round(percentile_cont(0.95) WITHIN GROUP (ORDER BY d)::numeric, 3), round(max(d)::numeric, 3)
    FROM (SELECT extract(epoch FROM recorded_at - upstream_datetime) AS d FROM change_log
          WHERE upstream_datetime > '$t0') x" | {
    read -r n p50 p95 max
    echo "baseline of 10 x 10,000 resources: all in sync after ${insync} s"
    echo "propagation over $n upstream changes (followed every 1 s): p50 ${p50} s, p95 ${p95} s, max ${max} s  [target: within interval + 1 s = 2 s: $(awk -v m="$max" 'BEGIN{print (m <= 2 ? "PASS" : "FAIL")}')]"
    echo "daemon resident memory while following: ${rss_kib} KiB now, ${hwm_kib} KiB peak"
  }
  kill -TERM "$daemon"; wait "$daemon" || status=1
  for p in "${pids[@]}"; do kill "$p"; done
  wait 2>/dev/null || true
  rm -rf "$work"
fi
if [ "$which" = all ] || [ "$which" = publish ]; then
  # How far our published Change List lags behind our change log while we
  # follow one large simulated Source (the Resource List of a large set is
  # slow to render; the Change List must not wait for it).
  n=${BENCH_PUBLISH_RESOURCES:-300000}
  echo "== bench/publish (tributary run following one tributary simulate of $n resources, 5 changes/s, every 1 s)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  work=$(mktemp -d /tmp/tributary-bench-publish.XXXXXX)
  psql "$PG_TEMP_CONNINFO" -qc "CREATE DATABASE bench_publish" >/dev/null
  db="$PG_TEMP_CONNINFO dbname=bench_publish"
  bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
  "$bin" simulate --listen 127.0.0.1:18600 --resources "$n" --change-rate 5 --seed 1 >/dev/null 2>&1 &
  sim=$!
  cat >"$work/config.json" <<CFG
{"database": "$db", "data_dir": "$work/data", "listen": "127.0.0.1:18599",
 "sources": [{"name": "sim", "url": "http://127.0.0.1:18600/", "interval": "1s"}]}
CFG
  "$bin" migrate --config "$work/config.json" >/dev/null
  started=$(date +%s)
  "$bin" run --config "$work/config.json" >"$work/run.log" 2>&1 &
  daemon=$!
  until [ "$(psql "$db" -Atc "SELECT count(*) FROM sync_run WHERE status = 'succeeded'")" -ge 2 ]; do
    sleep 0.5
  done
  echo "baseline of $n resources and a first incremental run: $(($(date +%s) - started)) s"
  # Let the one-time work after a baseline settle (its closed Change List
  # parts, the first Resource and Change Dumps), then measure.
  sleep "${BENCH_PUBLISH_SETTLE:-60}"
  python3 "$root/bench/doc_lag.py" http://127.0.0.1:18599 sim 10000 "$db" "${BENCH_PUBLISH_SECONDS:-60}" || status=1
  echo "daemon resident memory: $(awk '/VmRSS/{print $2}' "/proc/$daemon/status") KiB"
  kill -TERM "$daemon"; wait "$daemon" || status=1
  kill "$sim"; wait 2>/dev/null || true
  rm -rf "$work"
fi
if [ "$which" = all ] || [ "$which" = chain ]; then
  # Several changing Sources -> Tributary A (one named set merging them,
  # concurrent syncs) -> Tributary B following that set; every interval 1 s,
  # every other setting the default. The Sources stop changing after
  # BENCH_CHAIN_CHANGES each; then B must equal their union.
  n_src=${BENCH_CHAIN_SOURCES:-6}
  per=${BENCH_CHAIN_CHANGES:-60}
  echo "== bench/chain ($n_src x tributary simulate, 500 resources, 2 changes/s, $per changes each -> A (set 'all') -> B; interval 1 s)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  work=$(mktemp -d /tmp/tributary-bench-chain.XXXXXX)
  for db in chain_a chain_b; do psql "$PG_TEMP_CONNINFO" -qc "CREATE DATABASE $db" >/dev/null; done
  bin=${TRIBUTARY_BIN:-"$root/build/bench/aggregator/tributary"}
  pids=()
  sources=""
  names=""
  urls=()
  for i in $(seq 0 $((n_src - 1))); do
    port=$((18800 + i))
    "$bin" simulate --listen "127.0.0.1:$port" --resources 500 --change-rate 2 --max-changes "$per" --seed "$((i + 7))" >/dev/null 2>&1 &
    pids+=($!)
    sources+="${sources:+,}{\"name\": \"s$i\", \"url\": \"http://127.0.0.1:$port/\", \"interval\": \"1s\"}"
    names+="${names:+,}\"s$i\""
    urls+=("http://127.0.0.1:$port/")
  done
  cat >"$work/a.json" <<CFG
{"database": "$PG_TEMP_CONNINFO dbname=chain_a", "data_dir": "$work/a", "listen": "127.0.0.1:18799",
 "sets": [{"name": "all", "sources": [$names]}], "sources": [$sources]}
CFG
  cat >"$work/b.json" <<CFG
{"database": "$PG_TEMP_CONNINFO dbname=chain_b", "data_dir": "$work/b", "listen": "127.0.0.1:18798",
 "sources": [{"name": "a", "url": "http://127.0.0.1:18799/", "interval": "1s",
              "capability_lists": ["http://127.0.0.1:18799/sets/all/capabilitylist.xml"]}]}
CFG
  "$bin" migrate --config "$work/a.json" >/dev/null
  "$bin" migrate --config "$work/b.json" >/dev/null
  since=$(psql "$PG_TEMP_CONNINFO" -Atc "SELECT now()")
  "$bin" run --config "$work/a.json" >"$work/a.log" 2>&1 &
  a_pid=$!
  "$bin" run --config "$work/b.json" >"$work/b.log" 2>&1 &
  b_pid=$!
  # The Sources change for per/2 seconds from their start; then B has
  # BENCH_CHAIN_SETTLE seconds to catch up.
  sleep $((per / 2 + ${BENCH_CHAIN_SETTLE:-15}))
  python3 "$root/bench/chain.py" "$PG_TEMP_CONNINFO" chain_a chain_b "$since" "${urls[@]}" || status=1
  kill -TERM "$a_pid" "$b_pid"; wait "$a_pid" "$b_pid" || status=1
  for p in "${pids[@]}"; do kill "$p"; done
  wait 2>/dev/null || true
  rm -rf "$work"
fi
if [ "$which" = all ] || [ "$which" = push ]; then
  echo "== bench/push (tributary simulate --hub -> A -> B: upstream change -> visible in B's Change List; push, then polling every 60 s)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/push.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = oai-serve ]; then
  echo "== bench/oai-serve (tributary serve, default config: our OAI-PMH face over ${BENCH_OAI_SERVE_RECORDS:-1000000} resources, one harvester)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/oai/serve.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = oai ]; then
  echo "== bench/oai (tributary run, default config, harvesting ${BENCH_OAI_RECORDS:-100000} OAI-PMH records; Debian's HTTP::OAI beside it; a SIGKILL half way)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/oai/oai.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = iiif ]; then
  echo "== bench/iiif (tributary run, default config, following an IIIF Change Discovery stream of ${BENCH_IIIF_ACTIVITIES:-100000} activities; lag with interval 10 s)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/iiif/iiif.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = flood ]; then
  echo "== bench/flood (simulate --hub -> A -> B, default config but callback_allow_hosts; B's push lag while A's /hub and /push are flooded)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/flood.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = crash ]; then
  # The crash matrix (tests/crash/crash_matrix.py): trials of SIGKILLs
  # against a changing Source, then PostgreSQL
  # stopped for 30 s under a daemon, a full data_dir, and two daemons and a
  # CLI run on one database. Prints trials / lost / repeated.
  echo "== bench/crash (tributary sync/run killed with SIGKILL; PostgreSQL 15 with default durability)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  pgbin=/usr/lib/postgresql/15/bin
  as=""
  [ "$(id -u)" -eq 0 ] && as="runuser -u postgres --"
  # PY_RESYNC=<a checkout of resync/resync>: the reference Python client
  # follows ours in every check too (not a Debian package, so optional).
  extra=()
  [ -n "${PY_RESYNC:-}" ] && extra=(--py-resync "$PY_RESYNC")
  # First with configs that name the sources and nothing else, as a new
  # user writes them; then with the settings that make every path happen
  # within a trial (parts of 40, dumps rebuilt each second, lists or dumps
  # forced per scenario), and the extra cases.
  python3 "$root/tests/crash/crash_matrix.py" --bin "$root/build/bench/aggregator/tributary" --pg "$PG_TEMP_CONNINFO" \
    --trials 6 --default-config "${extra[@]}" || status=1
  python3 "$root/tests/crash/crash_matrix.py" --bin "$root/build/bench/aggregator/tributary" --pg "$PG_TEMP_CONNINFO" \
    --trials "${CRASH_TRIALS:-20}" --cases pg-restart,disk-full,disk-full-run,concurrent "${extra[@]}" \
    --pg-stop "$as $pgbin/pg_ctl -D $PG_TEMP_DIR/data -m fast -w stop" \
    --pg-start "$as $pgbin/pg_ctl -D $PG_TEMP_DIR/data -l $PG_TEMP_DIR/postgres.log -w -t 60 -o \"-k $PG_TEMP_DIR -c listen_addresses='' -c max_connections=200\" start" ||
    status=1
fi
if [ "$which" = all ] || [ "$which" = history ]; then
  # The randomized history test (#49) over many seeds: a model Source, our
  # baselines, audits, repairs, kills and failing resources, a follower;
  # both copies equal the Source and check-history holds on both. CI runs
  # 20 seeds; HISTORY_SEEDS (default 500) here, from HISTORY_SEED (default 1).
  echo "== bench/history (${HISTORY_SEEDS:-500} seeds from ${HISTORY_SEED:-1}; PostgreSQL 15 with default durability)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  cmake -S "$root" -B "$root/build/test" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$root/build/test" -j "$(nproc)" --target integration_tests tributary >/dev/null
  start=$(date +%s)
  out=$(mktemp /tmp/tributary-bench-history.XXXXXX)
  TRIBUTARY_TEST_PG="$PG_TEMP_CONNINFO" TRIBUTARY_HISTORY_SEED="${HISTORY_SEED:-1}" \
    TRIBUTARY_HISTORY_SEEDS="${HISTORY_SEEDS:-500}" \
    "$root/build/test/tests/integration_tests" -tc="History randomized*" >"$out" 2>&1 || status=1
  grep -E "seed [0-9]+:|seeds from|test cases|assertions" "$out" || true
  echo "history: $(( $(date +%s) - start )) s (full output: $out)"
fi
if [ "$which" = all ] || [ "$which" = load ]; then
  echo "== bench/load (tributary run, default config, applying a ${BENCH_LOAD_CHANGES:-50000}-change backlog under wrk, a 404 flood and slowloris)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/load.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = scale ]; then
  echo "== bench/scale (tributary run, default config, following tributary simulate of ${BENCH_SCALE_RESOURCES:-1000000} resources)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/scale.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = many ] || [ "$which" = scale ]; then
  # (scale: the 200-source figures follow the million-resource ones)
  echo "== bench/many (tributary run, default config, following ${BENCH_MANY_SOURCES:-200} x tributary simulate of ${BENCH_MANY_RESOURCES:-1000} resources, interval 1 min)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/many.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = retention ] || [ "$which" = scale ]; then
  # (scale: bounded disk under retention follows)
  echo "== bench/retention (tributary run following tributary simulate of ${BENCH_RETENTION_RESOURCES:-20000} resources at ${BENCH_RETENTION_RATE:-50} changes/s; change_retention 2m (default 30d), tributary gc --grace 30s (default 24h) every 30 s)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/retention.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = s3 ]; then
  echo "== bench/s3 (tributary sync --baseline and tributary serve, default config but content.store; local store against a throwaway Ceph RGW on loopback)"
  source "$root/deploy/lib/pg-temp.sh"
  [ -n "${PG_TEMP_CONNINFO:-}" ] || pg_temp_start
  bash "$root/bench/s3.sh" "$root" "$PG_TEMP_CONNINFO" || status=1
fi
if [ "$which" = all ] || [ "$which" = fuzz ]; then
  # libFuzzer over the parsers of untrusted input (tests/fuzz/targets.h),
  # clang 14 with ASan and UBSan, each target for FUZZ_SECONDS. The corpus
  # grows in build/fuzz/corpus/<target> (seeded from tests/fuzz/corpus, the
  # reference documents and the example config); a finding is written to
  # build/fuzz/findings/<target>/ and fails this step: reproduce it with
  # build/fuzz/tests/fuzz_<target> <file>, fix it, and save the input in
  # tests/fuzz/regressions/<target>/ (the unit tests run it from then on).
  echo "== bench/fuzz (libFuzzer, clang 14, ASan+UBSan, ${FUZZ_SECONDS:-120} s per target)"
  fz="$root/build/fuzz"
  CC=clang-14 CXX=clang++-14 cmake -S "$root" -B "$fz" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DTRIBUTARY_FUZZ=ON -DTRIBUTARY_BUILD_BENCH=OFF >/dev/null
  cmake --build "$fz" -j "$(nproc)" --target fuzz_reader fuzz_xml_scanner fuzz_datetime fuzz_package fuzz_config fuzz_http_request \
    fuzz_websub_request fuzz_notification fuzz_verification_query fuzz_oai_page fuzz_http_response fuzz_iiif \
    fuzz_robots >/dev/null
  for t in ${FUZZ_TARGETS:-reader xml_scanner datetime package config http_request websub_request notification verification_query oai_page http_response iiif robots}; do
    corpus="$fz/corpus/$t"
    findings="$fz/findings/$t"
    mkdir -p "$corpus" "$findings"
    cp -n "$root/tests/fuzz/corpus/$t/"* "$corpus/" 2>/dev/null || true
    case $t in
      reader) find "$root/../shared/reference" -name '*.xml' -size -256k -exec cp -n {} "$corpus/" \; 2>/dev/null || true ;;
      config) cp -n "$root/config/example.json" "$corpus/" ;;
    esac
    dict=()
    [ -f "$root/tests/fuzz/$t.dict" ] && dict=(-dict="$root/tests/fuzz/$t.dict")
    log="$fz/$t.log"
    set +e
    ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 \
      "$fz/tests/fuzz_$t" "$corpus" "${dict[@]}" -max_total_time="${FUZZ_SECONDS:-120}" -timeout=5 \
      -rss_limit_mb=512 -max_len=1048576 -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    execs=$(awk '/stat::number_of_executed_units/{print $NF}' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    found=$(find "$findings" -type f | wc -l)
    printf '%-13s %10s execs  cov %6s  corpus %6s files  findings %s  (exit %s)\n' "$t" "${execs:-?}" "${cov:-?}" \
      "$(find "$corpus" -type f | wc -l)" "$found" "$rc"
    if [ "$rc" -ne 0 ] || [ "$found" -ne 0 ]; then
      status=1
      grep -m1 -A12 'ERROR\|fuzz property broken\|runtime error' "$log" || tail -20 "$log"
    fi
  done
fi
exit $status
