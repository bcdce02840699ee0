#!/usr/bin/env bash
# tests/integration/ops/test_install.sh — `meson install --destdir` lays out
# exactly the expected files; the man pages render (man -l) and name every
# option foliod --help lists and every folio command; the sample config,
# with every key uncommented, parses to the built-in defaults (so it cannot
# drift from the option table); the installed rules and dashboard parse.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
INTEG=$(cd "$HERE/.." && pwd)
. "$INTEG/lib.sh"
: "${BUILD_ROOT:?}"
D=$T/dest
meson install -C "$BUILD_ROOT" --destdir "$D" --no-rebuild >"$T/install.log" 2>&1 ||
  { cat "$T/install.log"; fail "meson install"; }
PREFIX=$(meson introspect "$BUILD_ROOT" --buildoptions | jq -r '.[] | select(.name=="prefix") | .value')
SYSCONF=$(meson introspect "$BUILD_ROOT" --buildoptions | jq -r '.[] | select(.name=="sysconfdir") | .value')
case $SYSCONF in /*) ETC=$SYSCONF ;; *) ETC=$PREFIX/$SYSCONF ;; esac
want=$(sort <<EOF2
$PREFIX/bin/foliod
$PREFIX/bin/folio
$PREFIX/share/man/man8/foliod.8
$PREFIX/share/man/man1/folio.1
$ETC/foliod/foliod.conf
$PREFIX/lib/systemd/system/foliod.service
$PREFIX/lib/systemd/system/foliod.socket
$PREFIX/lib/sysusers.d/foliod.conf
$PREFIX/share/foliod/grafana/foliod-dashboard.json
$PREFIX/share/foliod/prometheus/foliod-rules.yml
$PREFIX/share/foliod/haproxy/foliod.cfg
EOF2
)
got=$(cd "$D" && find . -type f | sed 's|^\.||' | sort)
[ "$got" = "$want" ] || fail "installed files differ:
$(diff <(echo "$want") <(echo "$got"))"
ok "meson install --destdir: the $(wc -l <<<"$want") expected files, nothing else"

B=$D$PREFIX/bin
"$B/foliod" --version | grep -Eq '^foliod [0-9]+\.[0-9]+\.[0-9]+ \(git [0-9a-f]+' || fail "installed foliod --version"
"$B/folio" --help >/dev/null || fail "installed folio"
grep -q "^ExecStart=$PREFIX/bin/foliod --config $ETC/foliod/foliod.conf" "$D$PREFIX/lib/systemd/system/foliod.service" ||
  fail "ExecStart does not name the installed paths"

# man pages: render, and name every option / command
export MANWIDTH=100
man -l "$D$PREFIX/share/man/man8/foliod.8" >"$T/foliod.txt" 2>"$T/man.err" || fail "man -l foliod.8: $(cat "$T/man.err")"
[ ! -s "$T/man.err" ] || fail "man -l foliod.8 warns: $(cat "$T/man.err")"
for s in NAME SYNOPSIS OPTIONS SIGNALS SYSTEMD FILES; do grep -q "^$s" "$T/foliod.txt" || fail "foliod(8) has no $s section"; done
n=0
for o in $("$B/foliod" --help | grep -oE '^  --[a-z0-9-]+' ); do
  grep -q -- "$o" "$T/foliod.txt" || fail "foliod(8) does not document $o"
  n=$((n + 1))
done
man -l "$D$PREFIX/share/man/man1/folio.1" >"$T/folio.txt" 2>"$T/man.err" || fail "man -l folio.1"
[ ! -s "$T/man.err" ] || fail "man -l folio.1 warns: $(cat "$T/man.err")"
c=0
for cmd in $("$B/folio" --help | sed -n 's/^  \([a-z-]*\) .*/\1/p'); do
  grep -qi "^folio $cmd" "$T/folio.txt" || fail "folio(1) has no section for $cmd"
  grep -q -- "usage: folio $cmd" "$T/folio.txt" || fail "folio(1): no usage of $cmd"
  c=$((c + 1))
done
ok "man -l: foliod(8) documents all $n options, folio(1) all $c commands"

# sample config: every key uncommented gives the defaults
CONF=$D$ETC/foliod/foliod.conf
sed -n 's/^;\([a-z-]*\) = \(.\+\)$/\1 = \2/p' "$CONF" >"$T/keys"
[ "$(wc -l <"$T/keys")" -ge 15 ] || fail "sample config has few keys: $(cat "$T/keys")"
{ echo "[foliod]"; cat "$T/keys"; } >"$T/all.conf"
"$B/foliod" --socket "$T/x.sock" --dump-config >"$T/dump.default"
"$B/foliod" --socket "$T/x.sock" --config "$T/all.conf" --dump-config >"$T/dump.sample" || fail "sample keys do not parse"
diff "$T/dump.default" "$T/dump.sample" >/dev/null || fail "sample config values differ from the defaults: $(diff "$T/dump.default" "$T/dump.sample")"
"$B/foliod" --socket "$T/x.sock" --config "$CONF" --dump-config >/dev/null || fail "the sample config as installed does not parse"
ok "sample config: $(wc -l <"$T/keys") keys, uncommented = the built-in defaults"

if command -v promtool >/dev/null; then
  promtool check rules "$D$PREFIX/share/foliod/prometheus/foliod-rules.yml" >/dev/null || fail "installed rules"
fi
jq -e '.panels | length > 10' "$D$PREFIX/share/foliod/grafana/foliod-dashboard.json" >/dev/null || fail "installed dashboard JSON"
ok "installed Prometheus rules and Grafana dashboard parse"
