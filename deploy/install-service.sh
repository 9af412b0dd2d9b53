#!/usr/bin/env bash
# Installs Tributary as a systemd service (run as root on Debian 12):
# builds a Release binary, installs it to /usr/local/bin, creates the
# `tributary` system user, /etc/tributary (config, from config/example.json
# if none yet; tributary.env with a random admin token) and /var/lib/tributary,
# and the unit. It does not start it:
# edit /etc/tributary/tributary.json, then `systemctl enable --now tributary tributary-gc.timer`.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "install-service: run as root" >&2; exit 1; }
bash "$here/install-deps.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTRIBUTARY_BUILD_TESTS=OFF \
  -DTRIBUTARY_BUILD_BENCH=OFF >/dev/null
cmake --build "$root/build/release" -j "$(nproc)"
install -m 0755 "$root/build/release/aggregator/tributary" /usr/local/bin/tributary
install -d -m 0755 /usr/local/share/doc/tributary
install -m 0644 "$root/README.md" "$root/docs/api.md" /usr/local/share/doc/tributary/
install -d -m 0755 /usr/local/share/man/man1
install -m 0644 "$root/docs/man/tributary.1" /usr/local/share/man/man1/tributary.1
id tributary >/dev/null 2>&1 || useradd --system --home-dir /var/lib/tributary --shell /usr/sbin/nologin tributary
install -d -o tributary -g tributary -m 0750 /var/lib/tributary
install -d -o root -g tributary -m 0750 /etc/tributary
[ -f /etc/tributary/tributary.json ] ||
  install -o root -g tributary -m 0640 "$root/config/example.json" /etc/tributary/tributary.json
# The admin token the unit passes as TRIBUTARY_ADMIN_TOKEN (config/example.json
# reads it from there): random, readable by the service alone.
if [ ! -f /etc/tributary/tributary.env ]; then
  umask 027
  printf 'TRIBUTARY_ADMIN_TOKEN=%s\n' "$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" \
    > /etc/tributary/tributary.env
  chown root:tributary /etc/tributary/tributary.env
  chmod 0640 /etc/tributary/tributary.env
  umask 022
fi
install -m 0644 "$here/tributary.service" "$here/tributary-gc.service" "$here/tributary-gc.timer" /etc/systemd/system/
systemctl daemon-reload 2>/dev/null || true
echo "install-service: edit /etc/tributary/tributary.json, then: systemctl enable --now tributary tributary-gc.timer"
