#!/usr/bin/env bash
# bench/attn_ab.sh BUILD_A BUILD_B [ROUNDS] [bench_attention options...]
#
# Two builds of bench_attention (release build directories: an older
# tree's, built in a git worktree, and this one's) on decode 32 x 4096
# from memory (`bench_attention --only read`, section (b)), alternating A
# then B, ROUNDS times (default 6).  Options after ROUNDS go to both runs
# (e.g. --dtype q8).  Prints, per KV dtype, each build's median kernel
# time over the runs, the per-run kernel rates as % of the streaming read
# of the same run, and B's median time over A's.
#
# The VM's read bandwidth drifts by up to 2x within minutes (other guests
# on the host): a round where the streaming read drops shows the kernel at
# 70-110% of it, since the kernel then waits on the same contended
# memory.  Read the times and their ratio, and the % of runs taken while
# the streaming read stayed near its usual figure.
#
#   git worktree add /tmp/base 107d492
#   (cd /tmp/base && meson setup build-rel -Dbuildtype=release -Dtests=false &&
#    ninja -C build-rel bench/bench_attention)
#   bench/attn_ab.sh /tmp/base/build-rel build-rel 6
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 BUILD_A BUILD_B [ROUNDS] [bench_attention options...]" >&2
  exit 2
fi
a=$1 b=$2
shift 2
rounds=6
if [ $# -gt 0 ] && [[ $1 =~ ^[0-9]+$ ]]; then
  rounds=$1
  shift
fi
for d in "$a" "$b"; do
  [ -x "$d/bench/bench_attention" ] || { echo "$0: no $d/bench/bench_attention" >&2; exit 2; }
done

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 1; r <= rounds; r++)); do
  for side in A B; do
    dir=$a
    [ "$side" = B ] && dir=$b
    # "  q8: 2.612 ms, ... = 43% of streaming read ..." -> "B q8 2.612 43"
    "$dir/bench/bench_attention" --only read "$@" |
      sed -nE "s/^  ([a-z0-9]+): ([0-9.]+) ms, .*\) = ([0-9]+)% of streaming read.*/$side \1 \2 \3/p" >>"$out"
  done
done

python3 - "$out" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    side, dt, ms, pct = line.split()
    runs[(dt, side)].append((float(ms), int(pct)))
for dt in ("f32", "f16", "bf16", "q8"):
    if (dt, "A") not in runs or (dt, "B") not in runs:
        continue
    med = {s: statistics.median(ms for ms, _ in runs[(dt, s)]) for s in "AB"}
    pcts = {s: " ".join(str(p) for _, p in runs[(dt, s)]) for s in "AB"}
    print(f"{dt:5} A {med['A']:.3f} ms [{pcts['A']}%]  B {med['B']:.3f} ms [{pcts['B']}%]"
          f"  B/A time {med['B'] / med['A']:.3f}")
EOF
