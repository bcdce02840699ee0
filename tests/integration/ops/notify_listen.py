#!/usr/bin/env python3
"""tests/integration/ops/notify_listen.py SOCKET OUT — a stand-in for
systemd's notification socket: receives sd_notify datagrams on SOCKET and
appends each one to OUT (a line "---" after each message)."""
import os
import socket
import sys

path, out = sys.argv[1], sys.argv[2]
if os.path.exists(path):
    os.unlink(path)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "a", buffering=1) as f:
    f.write("LISTENING\n---\n")
    while True:
        msg = s.recv(65536).decode("utf-8", "replace")
        f.write(msg.rstrip("\n") + "\n---\n")
