#!/usr/bin/env bash
# Concurrency scenarios against foliod_fake (see client.mjs): 64 concurrent
# streams, 30+ hostile requests beside a good stream, 200 mid-stream
# disconnects then no used block, a small pool forcing preemption under 32
# streams (each identical to the same request alone), a slow reader.
. "$SRCDIR/lib.sh"
C="node $SRCDIR/client.mjs"
export FOLIO_FAKE_STEP_US=2000

start_daemon "$FOLIOD_FAKE" --kv-blocks 4096 --max-seqs 128 --max-body 1M
$C concurrent "$SOCK" 64 || fail concurrent
$C hostile "$SOCK" || fail hostile
$C disconnect "$SOCK" 200 || fail disconnect
$C slowreader "$SOCK" || fail slowreader
stop_daemon || fail "exit status"

# small pool: 32 x (20 prompt + 40 generated) tokens need ~128 blocks of 16
start_daemon "$FOLIOD_FAKE" --kv-blocks 40 --block-size 16 --max-seqs 32 --max-batch-tokens 256
$C preempt "$SOCK" 32 || fail preempt
stop_daemon || fail "exit status"

# idle timeout: silent and half-sent connections are closed
FOLIO_FAKE_STEP_US=10000 start_daemon "$FOLIOD_FAKE" --kv-blocks 256 --idle-timeout-ms 1000
$C idle "$SOCK" 1000 || fail idle
stop_daemon || fail "exit status"

# a long step: the loop thread still answers
FOLIO_FAKE_STEP_US=600000 start_daemon "$FOLIOD_FAKE" --kv-blocks 64
$C responsive "$SOCK" || fail responsive
stop_daemon || fail "exit status"
