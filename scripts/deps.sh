#!/usr/bin/env bash
# scripts/deps.sh — install the Debian 12 packages foliod needs, only those
# missing (safe to rerun).  Usage: scripts/deps.sh [extra-package ...]
set -euo pipefail

pkgs=(gcc meson ninja-build pkg-config cmake libuv1-dev libopenblas-dev libmimalloc-dev
      libcmocka-dev libcjson-dev libinih-dev libpcre2-dev node-llhttp curl libdnnl-dev libsystemd-dev
      haproxy iproute2 "$@")

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"; then
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
