# bench/peer/folio_build.sh — sourced by the peer scripts beside
# llama_build.sh: folio_build makes sure foliod's release build in $build
# (FOLIO_BUILD, default build-rel) exists and is the tree's (meson setup
# once, ninja every time: a stale build would measure other code);
# folio_kld FILE BASE TEXT prints "kld same_top": `folio perplexity` of
# FILE's predictions against BASE's on TEXT (512-token chunks, $threads).
folio_build() {
  local build=${build:?}
  [ -f "$build/build.ninja" ] || meson setup "$build" -Dbuildtype=release -Dtests=false >/dev/null
  ninja -C "$build" >/dev/null
}

folio_kld() {
  "${build:?}/tools/folio" perplexity --model "$1" --base "$2" --file "$3" --ctx 512 \
    --threads "${threads:?}" --json | jq -r '"\(.kld) \(.same_top)"'
}
