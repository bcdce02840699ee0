#!/usr/bin/env bash
# Who may call what (daemon/auth.h), with real peers: other uids on the
# Unix socket (setpriv), TCP clients with no key, a tenant's key and the
# operator's key.
#   1. TCP needs keys (or --insecure-listen, warned about); any address;
#      Host, Origin, Sec-Fetch-Site and Content-Type keep web pages out.
#   2. The matrix: every caller x every endpoint answers what the rule
#      says, under both tenant-views: deny (the views are the operator's)
#      and own (a tenant's /metrics and /v1/kv show only its own entries);
#      operator-uids moves the operator to another uid.
#   3. Unconfigured uids are tenants of their own: no prefix-cache hit
#      across them (the timing leak of a shared tenant).
#   4. One uid holding 5,000 connections, then partial bodies: another
#      tenant's requests all succeed; the hog's extra connections get a 503
#      JSON answer, not a reset.
# ACCESS_SECTIONS="tcp matrix prefix lockout" (the default) picks sections.
. "$SRCDIR/lib.sh"
ulimit -n "$(ulimit -Hn)"
chmod 711 "$T"
touch "$T/out" "$T/hdr"; chmod 666 "$T/out" "$T/hdr" # written by curl as other uids
port=$(( 20000 + RANDOM % 20000 ))
ALICE=2001 BOB=2002 STRANGER=3001 STRANGER2=3002 HOG=4001 VICTIM=4002

as_uid() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --clear-groups "$@"; }
open_socket() { chmod 666 "$SOCK"; } # other uids reach it (the mode is 0660)

# call WHO METHOD PATH [BODY] -> "STATUS" (body in $T/out, headers in $T/hdr)
# (a body goes as application/json; CTYPE=... sends another Content-Type)
# WHO: root | uid:N | tcp | tcp:KEY | tcph:HEADER (a raw extra header, no key)
call() {
  local who=$1 m=$2 p=$3 body=${4:-} pre=() url args=()
  args=(-s -o "$T/out" -D "$T/hdr" -w '%{http_code}' -X "$m")
  [ -n "$body" ] && args+=(-H "Content-Type: ${CTYPE:-application/json}" --data-binary "$body")
  case $who in
    root) args+=(--unix-socket "$SOCK"); url=http://x$p ;;
    uid:*) pre=(setpriv --reuid "${who#uid:}" --regid "${who#uid:}" --clear-groups)
           args+=(--unix-socket "$SOCK"); url=http://x$p ;;
    tcp) url=http://127.0.0.1:$port$p ;;
    tcp:*) args+=(-H "Authorization: Bearer ${who#tcp:}"); url=http://127.0.0.1:$port$p ;;
  esac
  "${pre[@]}" curl "${args[@]}" "$url" || true
}

cat >"$T/keys.ini" <<INI
[foliod]
kv-blocks = 512
operator-key = k-op
[tenant.alice]
uid = $ALICE
api_key = k-alice
[tenant.bob]
uid = $BOB
api_key = k-bob
INI

# --- 1. TCP needs API keys ---------------------------------------------------
section_tcp() {
rc=0; out=$(timeout 5 "$FOLIOD_FAKE" --socket "$SOCK" --listen "127.0.0.1:$port" 2>&1) || rc=$?
[ $rc = 2 ] || fail "TCP without keys: exit status $rc (124: it started and served)"
grep -q -- "--insecure-listen" <<<"$out" || fail "no hint at --insecure-listen: $out"
[ ! -e "$SOCK" ] || fail "socket left behind"
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --listen "127.0.0.1:$port" --insecure-listen
grep -q "warning: --insecure-listen" "$LOG" || fail "no startup warning for --insecure-listen"
[ "$(call tcp POST /v1/completions '{"prompt":[1,2],"max_tokens":2}')" = 200 ] || fail "insecure TCP"
[ "$(call tcp GET /metrics)" = 403 ] || fail "insecure TCP client reads /metrics (tenant-views = deny)"
stop_daemon || fail "exit status"
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --listen "127.0.0.1:$port" --insecure-listen --tenant-views own
[ "$(call tcp GET /metrics)" = 200 ] || fail "insecure TCP /metrics with tenant-views = own"
grep -q 'tenant="default"' "$T/out" || fail "insecure TCP client is not tenant default"
grep -q 'folio_prefix_cache_hits_total' "$T/out" && fail "insecure TCP client sees global counters"
# Content-Type matters where no key does: a page's simple post is 415
for ct in text/plain application/x-www-form-urlencoded 'multipart/form-data; boundary=x'; do
  st=$(CTYPE=$ct call tcp POST /v1/completions '{"prompt":[1,2],"max_tokens":2}')
  [ "$st" = 415 ] || fail "insecure TCP POST as $ct: $st"
done
jq -e '.error.code == "unsupported_media_type" and .error.type == "invalid_request_error"' "$T/out" >/dev/null ||
  fail "415 not in the OpenAI error shape: $(cat "$T/out")"
stop_daemon || fail "exit status"
ok "TCP without API keys: refused at start unless --insecure-listen, which is warned about"

# any address (here every IPv4 one), reached over loopback
start_daemon "$FOLIOD_FAKE" --config "$T/keys.ini" --listen "0.0.0.0:$port" --tenant-views own
open_socket
[ "$(call tcp:k-alice GET /v1/models)" = 200 ] || fail "tenant key on 0.0.0.0"
tcpreq() { curl -s -o "$T/out" -w '%{http_code}' "$@" || true; }
st=$(tcpreq -H 'Authorization: Bearer k-alice' -H 'Host: evil.example:8000' "http://127.0.0.1:$port/v1/models")
[ "$st" = 403 ] || fail "foreign Host: $st"
st=$(tcpreq -H 'Authorization: Bearer k-alice' -H 'Host: localhost' "http://127.0.0.1:$port/v1/models")
[ "$st" = 200 ] || fail "Host localhost: $st"
# what a web page's form post looks like: Origin of the page, text/plain
st=$(tcpreq -H "Origin: http://evil.example" -H 'Content-Type: text/plain' \
  --data-binary '{"prompt":[1],"max_tokens":1}' "http://127.0.0.1:$port/v1/completions")
[ "$st" = 403 ] || fail "cross-origin form post: $st"
st=$(tcpreq -H 'Authorization: Bearer k-alice' -H "Origin: http://evil.example" "http://127.0.0.1:$port/v1/kv")
[ "$st" = 403 ] || fail "cross-origin read with a key: $st"
st=$(tcpreq -H 'Authorization: Bearer k-alice' -H "Origin: http://127.0.0.1:$port" "http://127.0.0.1:$port/v1/kv")
[ "$st" = 200 ] || fail "same-origin read: $st"
st=$(tcpreq -H 'Authorization: Bearer k-alice' -H "Sec-Fetch-Site: cross-site" "http://127.0.0.1:$port/metrics")
[ "$st" = 403 ] || fail "Sec-Fetch-Site cross-site: $st"
# a browser's Basic login (the key as password) for the dashboard
st=$(tcpreq -D "$T/hdr" "http://127.0.0.1:$port/dashboard")
[ "$st" = 401 ] && grep -qi '^WWW-Authenticate: Basic' "$T/hdr" || fail "dashboard 401 without a Basic challenge: $st"
st=$(tcpreq -u "me:k-bob" "http://127.0.0.1:$port/v1/kv")
[ "$st" = 200 ] && grep -q '"tenant":"bob"' "$T/out" || fail "Basic with a tenant key: $st"
ok "TCP on any address with keys; foreign Host, Origin and Sec-Fetch-Site refused (403); Basic login"
# Content-Type on TCP: JSON (any parameters, +json) or none; a page's
# simple types are 415 (after the key: no key is still 401); the socket
# takes curl -d's form-urlencoded
B='{"prompt":[1,2],"max_tokens":2}'
for ct in text/plain 'text/plain;charset=UTF-8' application/x-www-form-urlencoded 'multipart/form-data; boundary=x' text/json application/jsonx; do
  st=$(CTYPE=$ct call tcp:k-alice POST /v1/completions "$B")
  [ "$st" = 415 ] || fail "TCP POST as '$ct': $st, want 415"
  st=$(CTYPE=$ct call tcp:k-alice POST /tokenize '{"prompt":"hi"}')
  [ "$st" = 415 ] || fail "TCP /tokenize as '$ct': $st, want 415"
  st=$(CTYPE=$ct call tcp POST /v1/completions "$B")
  [ "$st" = 401 ] || fail "TCP POST without a key as '$ct': $st, want 401"
done
for ct in application/json 'Application/JSON; charset=utf-8' 'application/vnd.foo+json'; do
  st=$(CTYPE=$ct call tcp:k-alice POST /v1/completions "$B")
  [ "$st" = 200 ] || fail "TCP POST as '$ct': $st, want 200"
done
st=$(curl -s -o "$T/out" -w '%{http_code}' -H 'Authorization: Bearer k-alice' -H 'Content-Type:' \
  --data-binary "$B" "http://127.0.0.1:$port/v1/completions" || true)
[ "$st" = 200 ] || fail "TCP POST without a Content-Type: $st, want 200"
st=$(curl -s -o "$T/out" -w '%{http_code}' --unix-socket "$SOCK" -d "$B" http://x/v1/completions || true)
[ "$st" = 200 ] || fail "socket POST with curl -d (form-urlencoded): $st, want 200"
st=$(CTYPE=text/plain call uid:$ALICE POST /v1/completions "$B")
[ "$st" = 200 ] || fail "socket POST as text/plain: $st, want 200"
ok "Content-Type on TCP: text/plain, forms, multipart 415 (401 without a key); JSON, +json, none 200; the socket takes any"
# the socket behind a TCP proxy (the dashboard's way without --listen): what
# a browser sends gets TCP's checks; curl's requests pass as before
if command -v socat >/dev/null; then
  sport=$(( port + 1 ))
  socat "TCP-LISTEN:$sport,fork,reuseaddr,bind=127.0.0.1" "UNIX-CONNECT:$SOCK" 2>/dev/null &
  SOCAT=$!
  for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$sport/health" && break; sleep 0.05; done
  px() { curl -s -o "$T/out" -w '%{http_code}' "$@" || true; }
  [ "$(px "http://127.0.0.1:$sport/v1/kv")" = 200 ] || fail "proxied /v1/kv from curl"
  [ "$(px -H 'Sec-Fetch-Site: same-origin' "http://127.0.0.1:$sport/v1/kv")" = 200 ] || fail "proxied same-origin read"
  [ "$(px -H 'Origin: http://evil.example' -H 'Content-Type: text/plain' --data-binary "$B" "http://127.0.0.1:$sport/v1/completions")" = 403 ] ||
    fail "cross-origin post through the proxy"
  [ "$(px -H 'Sec-Fetch-Site: cross-site' "http://127.0.0.1:$sport/v1/kv")" = 403 ] || fail "cross-site read through the proxy"
  [ "$(px -H 'Host: evil.example' -H 'Sec-Fetch-Site: same-origin' "http://127.0.0.1:$sport/v1/kv")" = 403 ] ||
    fail "rebound Host through the proxy"
  [ "$(px -H "Origin: http://127.0.0.1:$sport" -H 'Content-Type: text/plain' --data-binary "$B" "http://127.0.0.1:$sport/v1/completions")" = 415 ] ||
    fail "same-origin text/plain post through the proxy"
  [ "$(px -H 'Content-Type: text/plain' --data-binary "$B" "http://127.0.0.1:$sport/v1/completions")" = 200 ] ||
    fail "curl's text/plain post through the proxy"
  kill $SOCAT; wait $SOCAT 2>/dev/null || true
  ok "the socket behind socat: a browser's cross-site or rebound requests 403, its form posts 415; curl's pass"
else
  echo "note: socat not installed; the proxied socket is not exercised"
fi
stop_daemon || fail "exit status"
}

# --- 2. the matrix ---------------------------------------------------------------
# matrix_run deny|own: the whole matrix under that tenant-views
matrix_run() {
local views=$1 n0=$n
start_daemon "$FOLIOD_FAKE" --config "$T/keys.ini" --listen "127.0.0.1:$port" --tenant-views "$views"
open_socket
# traffic of both tenants first, so that each has series and blocks
[ "$(call uid:$ALICE POST /v1/completions '{"prompt":[5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22],"max_tokens":3}')" = 200 ] || fail "alice"
[ "$(call uid:$BOB POST /v1/completions '{"prompt":[1,2,3],"max_tokens":2}')" = 200 ] || fail "bob"
[ "$(call uid:$STRANGER POST /v1/completions '{"prompt":[1,2,3],"max_tokens":2}')" = 200 ] || fail "stranger"
endpoints=(
  "GET /health"
  "POST /v1/completions {\"prompt\":[1,2],\"max_tokens\":2}"
  "POST /v1/chat/completions {\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":2}"
  "GET /v1/models"
  "GET /v1/models/fake-tiny"
  "GET /version"
  "GET /metrics"
  "GET /v1/kv"
  "GET /dashboard"
  "POST /tokenize {\"prompt\":\"hi\"}"
  "POST /detokenize {\"tokens\":[1,2]}"
  "POST /apply-template {\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}"
  "GET /no-such-route"
  "DELETE /v1/kv"
)
# the operator's answers are the reference for every admitted caller
declare -A want
for e in "${endpoints[@]}"; do
  read -r m p b <<<"$e"
  want[$p$m]=$(call root "$m" "$p" "$b")
done
for p in /health/GET /v1/completions/POST /v1/models/GET /v1/models/fake-tiny/GET /version/GET /metrics/GET /v1/kv/GET /dashboard/GET; do
  k=${p%/*}${p##*/}
  [ "${want[$k]}" = 200 ] || fail "operator: $p -> ${want[$k]}"
done
[ "${want[/no-such-routeGET]}" = 404 ] && [ "${want[/v1/kvDELETE]}" = 405 ] || fail "operator 404/405"
# caller -> the tenant it must see (empty: refused with the status after ':')
callers=("uid:$ALICE=alice" "uid:$BOB=bob" "uid:$STRANGER=uid-$STRANGER" "tcp=:401"
         "tcp:k-alice=alice" "tcp:k-bob=bob" "tcp:k-op=*" "tcp:wrong=:401" "root=*")
for cw in "${callers[@]}"; do
  who=${cw%%=*} sees=${cw#*=}
  for e in "${endpoints[@]}"; do
    read -r m p b <<<"$e"
    st=$(call "$who" "$m" "$p" "$b")
    n=$((n + 1))
    if [ "$p" = /health ]; then exp=200
    elif [ "${sees:0:1}" = : ]; then exp=${sees#:}
    elif [ "$views" = deny ] && [ "$sees" != "*" ] && [[ " /metrics /v1/kv /dashboard " = *" $p "* ]]; then
      exp=403 # refused before the method is looked at: no 405 either
    else exp=${want[$p$m]}; fi
    [ "$st" = "$exp" ] || fail "$who $m $p: $st, want $exp"
    if [ "$exp" = 401 ] && ! grep -qi '^WWW-Authenticate:' "$T/hdr"; then fail "$who $p: 401 without WWW-Authenticate"; fi
    [ "$st" = 200 ] || continue
    case $p in
      /metrics)
        got=$(grep -o 'tenant="[^"]*"' "$T/out" | sort -u | tr '\n' ' ')
        if [ "$sees" = "*" ]; then
          for t in default alice bob "uid-$STRANGER"; do grep -q "tenant=\"$t\"" <<<"$got" || fail "$who: operator's /metrics lacks $t"; done
          grep -q '^folio_prefix_cache_hits_total' "$T/out" || fail "$who: operator lacks global counters"
        else
          [ "$got" = "tenant=\"$sees\" " ] || fail "$who /metrics shows tenants: $got (want $sees only)"
          for g in folio_prefix_cache_hits_total folio_prompt_tokens_total folio_num_requests_running folio_kv_blocks_used folio_time_to_first_token_seconds_count folio_http_responses_total; do
            grep -q "^$g" "$T/out" && fail "$who /metrics shows the global $g"
          done
          grep -Eq '^folio_kv_num_blocks(\{[^}]*\})? 512' "$T/out" || fail "$who /metrics lacks the pool's geometry"
        fi ;;
      /v1/kv)
        names=$(jq -r '[.tenants[].name] | join(",")' "$T/out")
        if [ "$sees" = "*" ]; then
          [ "$(jq -r 'has("prefix_cache")' "$T/out")" = true ] || fail "$who: operator's /v1/kv lacks prefix_cache"
          for t in alice bob; do grep -q "$t" <<<"$names" || fail "$who: operator's /v1/kv lacks $t"; done
        else
          [ "$names" = "$sees" ] || fail "$who /v1/kv tenants: $names (want $sees)"
          [ "$(jq -r 'has("prefix_cache") or has("preemptions_total")' "$T/out")" = false ] || fail "$who /v1/kv shows global counters"
          # its block map holds only its own blocks: one tenant id at most
          ids=$(jq -r '[.block_map.states | split("")[] | select(. != "." and . != ":")] | unique | length' "$T/out")
          [ "$ids" -le 1 ] || fail "$who /v1/kv block map shows $ids tenants' blocks"
        fi ;;
    esac
  done
done
# alice's blocks are in the operator's map but not in bob's view
call root GET '/v1/kv?map=full' >/dev/null
a_blocks=$(jq '[.block_map[] | select(.state != "free" and .tenant == 1)] | length' "$T/out")
[ "$a_blocks" -gt 0 ] || fail "alice holds no blocks in the operator's map"
if [ "$views" = own ]; then
  call uid:$BOB GET '/v1/kv?map=full' >/dev/null
  [ "$(jq '[.block_map[] | select(.state != "free" and .tenant == 1)] | length' "$T/out")" = 0 ] || fail "bob sees alice's blocks"
else
  [ "$(call uid:$BOB GET '/v1/kv?map=full')" = 403 ] || fail "bob reads /v1/kv?map=full under deny"
  jq -e '.error.type == "permission_error"' "$T/out" >/dev/null || fail "403 not in the error shape"
fi
stop_daemon || fail "exit status"
ok "access matrix, tenant-views = $views: $((n - n0)) answers as the rule says"
}

section_matrix() {
n=0
matrix_run deny
matrix_run own

# operator-uids: bob's uid is the operator (and still bob); root no longer
start_daemon "$FOLIOD_FAKE" --config "$T/keys.ini" --operator-uids "$BOB, 5"
open_socket
[ "$(call uid:$BOB GET /v1/kv)" = 200 ] && [ "$(jq -r 'has("prefix_cache")' "$T/out")" = true ] ||
  fail "operator uid $BOB does not get the operator's /v1/kv"
[ "$(call uid:$BOB POST /v1/completions '{"prompt":[1,2],"max_tokens":2}')" = 200 ] || fail "bob's completion"
grep -q 'tenant=bob' "$LOG" || fail "operator uid $BOB is not tenant bob: $(tail -3 "$LOG")"
[ "$(call root GET /metrics)" = 403 ] || fail "root still the operator with --operator-uids"
[ "$(call uid:$ALICE GET /metrics)" = 403 ] || fail "alice reads /metrics"
[ "$(call root GET /v1/models)" = 200 ] || fail "root is not even a tenant"
stop_daemon || fail "exit status"

# unknown-uid = refuse: a stranger gets 403 on every route but /health
printf '[foliod]\nkv-blocks = 256\nunknown-uid = refuse\n[tenant.alice]\nuid = %s\n' $ALICE >"$T/refuse.ini"
start_daemon "$FOLIOD_FAKE" --config "$T/refuse.ini"
open_socket
for e in "${endpoints[@]}"; do
  read -r m p b <<<"$e"
  st=$(call uid:$STRANGER "$m" "$p" "$b")
  n=$((n + 1))
  exp=403; [ "$p" = /health ] && exp=200
  [ "$st" = "$exp" ] || fail "refused uid $m $p: $st, want $exp"
done
[ "$(call uid:$ALICE GET /v1/models)" = 200 ] || fail "alice refused"
stop_daemon || fail "exit status"
ok "access matrix: $n answers as the rule says (2 tenants, an unconfigured uid (own / refused), TCP with no key, a wrong key, tenant keys, the operator's key, the operator's uid; both tenant-views; operator-uids)"

}

# --- 3. unconfigured uids don't share a prefix cache ----------------------------
section_prefix() {
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --block-size 16 --tenant-views own
open_socket
P='{"prompt":['$(seq -s, 1 96)'],"max_tokens":1}'
hits() { call root GET /metrics >/dev/null; awk '/^folio_prefix_cache_hits_total[ {]/{print $NF}' "$T/out"; }
h0=$(hits)
[ "$(call uid:$STRANGER POST /v1/completions "$P")" = 200 ] || fail "stranger 1"
h1=$(hits)
[ "$(call uid:$STRANGER POST /v1/completions "$P")" = 200 ] || fail "stranger 1 again"
h2=$(hits)
[ "$h2" -gt "$h1" ] || fail "no prefix-cache hit within one uid ($h1 -> $h2): the check below proves nothing"
[ "$(call uid:$STRANGER2 POST /v1/completions "$P")" = 200 ] || fail "stranger 2"
h3=$(hits)
[ "$h3" = "$h2" ] || fail "uid $STRANGER2 hit uid $STRANGER's cached prompt ($h2 -> $h3 tokens): shared tenant"
call uid:$STRANGER2 GET /metrics >/dev/null
grep -q "tenant=\"uid-$STRANGER\"" "$T/out" && fail "uid $STRANGER2 sees uid $STRANGER's series"
stop_daemon || fail "exit status"
ok "unconfigured uids are tenants of their own: prefix hits $h0 -> $h1 -> $h2 (same uid), none across uids"
}

# --- 4. one uid can't lock the others out ---------------------------------------
section_lockout() {
start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --idle-timeout-ms 120000
open_socket
mkfifo "$T/holdin"
exec 7<>"$T/holdin"
as_uid $HOG node "$SRCDIR/hold.mjs" "$SOCK" 5000 <"$T/holdin" >"$T/hold.out" 2>&1 7>&- &
HPID=$!
for _ in $(seq 1 600); do [ -s "$T/hold.out" ] && break; sleep 0.1; done
cat "$T/hold.out"
bad=0
for i in $(seq 1 40); do
  st=$(call uid:$VICTIM POST /v1/completions '{"prompt":[1,2,3],"max_tokens":4}')
  [ "$st" = 200 ] || bad=$((bad + 1))
done
[ $bad = 0 ] || fail "$bad of 40 requests of another tenant failed while one uid held 5000 connections"
jq -e '.connected == 5000 and .open == 1024 and .answered == 3976 and .reset == 0 and .bad503 == 0' "$T/hold.out" >/dev/null ||
  fail "hog: $(cat "$T/hold.out") (want 1024 held, 3976 answered 503, no reset)"
call root GET /metrics >/dev/null
grep -Eq '^folio_connections_refused_total(\{[^}]*\})? [1-9]' "$T/out" || fail "refusals not counted"
exec 7>&-
wait $HPID || true
# partial bodies: 100 x 900 KB from one uid, over its 32 MB share
exec 7<>"$T/holdin"
as_uid $HOG node "$SRCDIR/hold.mjs" "$SOCK" 100 921600 <"$T/holdin" >"$T/hold2.out" 2>&1 7>&- &
HPID=$!
for _ in $(seq 1 600); do [ -s "$T/hold2.out" ] && break; sleep 0.1; done
cat "$T/hold2.out"
jq -e '.answered >= 50 and .open >= 30 and .reset == 0 and .bad503 == 0' "$T/hold2.out" >/dev/null ||
  fail "bodies: $(cat "$T/hold2.out") (want ~35 held, the rest answered 503)"
bad=0
for i in $(seq 1 20); do
  st=$(call uid:$VICTIM POST /v1/completions '{"prompt":[1,2,3],"max_tokens":4}')
  [ "$st" = 200 ] || bad=$((bad + 1))
done
[ $bad = 0 ] || fail "$bad of 20 requests of another tenant failed while one uid held 32 MB of partial bodies"
exec 7>&-
wait $HPID || true
stop_daemon || fail "exit status"
ok "one uid holding 5000 connections, then 32 MB of partial bodies: another tenant 60/60 served; the excess answered 503 JSON, none reset"
}

for sec in ${ACCESS_SECTIONS:-tcp matrix prefix lockout}; do "section_$sec"; done
