# Sourced by test and bench scripts (issue #18): a throwaway single-node Ceph
# cluster serving S3 through the RADOS Gateway on 127.0.0.1, in a temporary
# directory: one monitor, one OSD on memstore (RAM, capped), radosgw, and an
# S3 user. Settings measured in ../shared/BUILD-NOTES.md: msgr v1 only,
# fast paxos, no crush/class updates on start (else about 1 start in 3 dies
# with 'wrong fsid'), pool size 1. The beast frontend needs tcp_nodelay=1:
# without it every GET waited out a delayed ACK (46 ms each, measured; 3.4
# ms with it), which held cold reads from the bucket to 285/s. Daemon output goes to files: inheriting a
# pipe hangs a $(...) caller.
#
# Started by deploy/test.sh for the S3 content tier's tests; starts in about
# 2 s and takes about 125 MB RSS.
#
#   rgw_temp_install installs the Debian packages if missing (as root)
#   rgw_temp_start   sets RGW_TEMP_DIR, RGW_TEMP_ENDPOINT (http://127.0.0.1:PORT),
#                    RGW_TEMP_ACCESS_KEY and RGW_TEMP_SECRET_KEY; stops on EXIT
#                    (replacing any EXIT trap: callers that also start
#                    PostgreSQL must stop both themselves)
# An S3 bucket name needs at least 3 characters. The OSD must sit under a
# host bucket (the default rule picks one OSD per host) and be made with
# the uuid it was created with, or it never comes up.
rgw_temp_install() {
  local missing=() p
  for p in radosgw ceph-mon ceph-osd ceph-common uuid-runtime; do
    dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

rgw_temp_start() {
  RGW_TEMP_DIR=$(mktemp -d /tmp/tributary-rgw.XXXXXX)
  local d=$RGW_TEMP_DIR
  local mon_port=$((20000 + RANDOM % 20000))
  local rgw_port=$((mon_port + 1))
  local fsid osd_uuid
  fsid=$(uuidgen)
  osd_uuid=$(uuidgen)
  mkdir -p "$d/mon/a" "$d/osd/0" "$d/run" "$d/log" "$d/rgw"
  cat >"$d/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$mon_port
auth cluster required = none
auth service required = none
auth client required = none
ms bind msgr2 = false
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon allow pool delete = true
mon data avail warn = 1
mon data avail crit = 1
paxos propose interval = 0.01
paxos min wait = 0.01
osd crush update on start = false
osd class update on start = false
osd objectstore = memstore
memstore device bytes = ${RGW_TEMP_BYTES:-2147483648}
run dir = $d/run
admin socket = $d/run/\$name.asok
pid file = $d/run/\$name.pid
log file = $d/log/\$name.log
keyring = $d/keyring
[mon.a]
mon data = $d/mon/a
[osd.0]
osd data = $d/osd/0
[client.rgw]
rgw frontends = beast endpoint=127.0.0.1:$rgw_port tcp_nodelay=1
rgw data = $d/rgw
rgw dns name = 127.0.0.1
CONF
  local c=(-c "$d/ceph.conf")
  # The monitor answers commands a moment after it starts; before that the
  # CLI fails with "EPERM: problem getting command descriptions from mon"
  # (seen about 1 start in 7): retried.
  ceph_retry() {
    local i
    for i in $(seq 40); do
      ceph "$@" && return 0
      sleep 0.25
    done
    return 1
  }
  trap 'rgw_temp_stop' EXIT
  monmaptool --create --addv a "[v1:127.0.0.1:$mon_port]" --fsid "$fsid" "$d/monmap" >"$d/log/setup.log" 2>&1 &&
    ceph-mon "${c[@]}" --mkfs -i a --monmap "$d/monmap" >>"$d/log/setup.log" 2>&1 &&
    ceph-mon "${c[@]}" -i a >>"$d/log/setup.log" 2>&1 </dev/null &&
    ceph_retry "${c[@]}" osd create "$osd_uuid" >>"$d/log/setup.log" 2>&1 &&
    ceph-osd "${c[@]}" -i 0 --mkfs --osd-uuid "$osd_uuid" >>"$d/log/setup.log" 2>&1 &&
    ceph_retry "${c[@]}" osd crush add osd.0 1.0 host=node root=default >>"$d/log/setup.log" 2>&1 &&
    ceph-osd "${c[@]}" -i 0 >>"$d/log/setup.log" 2>&1 </dev/null &&
    radosgw "${c[@]}" -n client.rgw >>"$d/log/setup.log" 2>&1 </dev/null ||
    { cat "$d/log/setup.log"; return 1; }
  RGW_TEMP_ENDPOINT="http://127.0.0.1:$rgw_port"
  RGW_TEMP_ACCESS_KEY=tributarytest
  RGW_TEMP_SECRET_KEY=tributarytestsecret
  local i
  for i in $(seq 120); do
    curl -s -o /dev/null "$RGW_TEMP_ENDPOINT/" && break
    sleep 0.25
  done
  radosgw-admin "${c[@]}" user create --uid tributary --display-name tributary \
    --access-key "$RGW_TEMP_ACCESS_KEY" --secret-key "$RGW_TEMP_SECRET_KEY" >>"$d/log/setup.log" 2>&1 ||
    { cat "$d/log/setup.log"; return 1; }
}

rgw_temp_stop() {
  if [ -n "${RGW_TEMP_DIR:-}" ] && [ -d "$RGW_TEMP_DIR" ]; then
    local f
    for f in "$RGW_TEMP_DIR"/run/*.pid; do
      [ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
    done
    rm -rf "$RGW_TEMP_DIR"
  fi
}
