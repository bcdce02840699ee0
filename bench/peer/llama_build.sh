# bench/peer/llama_build.sh — sourced by the peer scripts: llama_tool
# TARGET prints the path of llama.cpp's TARGET (llama-server,
# llama-quantize, ...), built from the llama.cpp source the node-llama-cpp
# npm package carries (a git bundle in node_modules/node-llama-cpp/llama):
# the package is installed into WORK (bench/peer/.npm), the bundle cloned
# into WORK/llama.cpp and TARGET built there with cmake (Release,
# GGML_NATIVE: tuned for this CPU, as foliod's release build is), once.
llama_tool() {
  local target=$1 work=${work:?} src
  mkdir -p "$work"
  if [ ! -d "$work/node_modules/node-llama-cpp" ]; then
    (cd "$work" && { [ -f package.json ] || echo '{"name":"folio-peer","private":true}' > package.json; } &&
     npm install --no-audit --no-fund --omit=optional --ignore-scripts \
       node-llama-cpp@3.22.1 @node-llama-cpp/linux-x64@3.22.1 >npm.log 2>&1)
  fi
  src=$work/llama.cpp
  if [ ! -d "$src" ]; then
    git -c advice.detachedHead=false clone -q "$work/node_modules/node-llama-cpp/llama/gitRelease.bundle" "$src"
  fi
  if [ ! -x "$src/build/bin/$target" ]; then
    command -v cmake >/dev/null || apt-get install -y cmake >/dev/null
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
      -DLLAMA_CURL=OFF >"$work/cmake.log"
    cmake --build "$src/build" --target "$target" -j "$(nproc)" >"$work/build-$target.log"
  fi
  echo "$src/build/bin/$target"
}
