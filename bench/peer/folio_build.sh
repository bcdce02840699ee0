# bench/peer/folio_build.sh — sourced by the peer scripts beside
# llama_build.sh: folio_build makes sure foliod's release build exists in
# $build (FOLIO_BUILD, default build-rel; meson setup + ninja, once);
# folio_kld FILE BASE TEXT prints "kld same_top": `folio perplexity` of
# FILE's predictions against BASE's on TEXT (512-token chunks, $threads).
folio_build() {
  local build=${build:?}
  if [ ! -x "$build/tools/folio" ] || [ ! -x "$build/daemon/foliod" ]; then
    meson setup "$build" -Dbuildtype=release -Dtests=false >/dev/null
    ninja -C "$build"
  fi
}

folio_kld() {
  "${build:?}/tools/folio" perplexity --model "$1" --base "$2" --file "$3" --ctx 512 \
    --threads "${threads:?}" --json | jq -r '"\(.kld) \(.same_top)"'
}
