#!/usr/bin/env python3
"""dist/man/gen_docs.py — foliod(8), folio(1) and the sample foliod.conf,
generated at build time from the programs' own help, which their option
tables print (daemon/config_opts.c's table for foliod; tools/folio.c's command
table and each command's --help for folio), so the documents never drift
from the code.

usage: gen_docs.py FOLIOD FOLIO VERSION OUT_FOLIOD_8 OUT_FOLIO_1 OUT_CONF
"""
import re
import subprocess
import sys

foliod, folio, version, out8, out1, outconf = sys.argv[1:7]
DATE = "2026"


def run(*args):
    return subprocess.run(list(args), check=True, capture_output=True, text=True).stdout


def roff(text):
    """Escapes a line of text for roff (backslashes, leading dots/quotes)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


# ---- foliod: the option table, parsed from --help ---------------------------
help_text = run(foliod, "--help")
opt_re = re.compile(r"^  (--[a-z0-9-]+)(?: (\S+))?\s{2,}(.*?)(?: \[([^\]]*)\])?$")
key_re = re.compile(r"^  ([a-z_]+)\s{2,}(.*)$")
options, tenant_keys, section = [], [], None
for line in help_text.splitlines():
    if line.startswith("options:"):
        section = "opts"
    elif line.startswith("config file"):
        section = "keys"
    elif section == "opts" and (m := opt_re.match(line)):
        options.append(m.groups())
    elif section == "keys" and (m := key_re.match(line)):
        tenant_keys.append(m.groups())
if len(options) < 10 or not tenant_keys:
    sys.exit("gen_docs.py: cannot parse foliod --help")

m = []
m.append(f'.TH FOLIOD 8 "{DATE}" "foliod {version}" "System Administration"')
m.append(".SH NAME\nfoliod \\- serve a language model to many tenants over HTTP on a Unix socket")
m.append(".SH SYNOPSIS\n.B foliod\n[\\fIOPTIONS\\fR]")
m.append(""".SH DESCRIPTION
foliod serves a transformer language model (GGUF, llama architectures)
through an OpenAI\\-compatible HTTP/1.1 API on a Unix socket, and
optionally TCP.  Its KV cache lives in fixed\\-size pages; a scheduler
batches requests continuously with tenant fair share and quotas.
Each connection's peer uid (or API key on TCP) names its tenant.
.PP
Endpoints: POST /v1/completions, /v1/chat/completions, /tokenize,
/detokenize; GET /v1/models, /health, /metrics (Prometheus), /v1/kv (KV
pool and block map, JSON), /dashboard, /version.""")
m.append(".SH OPTIONS\nEvery option can also be set in the configuration file "
         "(\\fB\\-\\-config\\fR) as a key of its [foliod] section; the command line wins.")
for name, arg, text, default in options:
    m.append(".TP")
    m.append(f"\\fB{roff(name)}\\fR" + (f" \\fI{roff(arg)}\\fR" if arg else ""))
    m.append(roff(text) + (f" (default: {roff(default)})" if default else ""))
m.append(".SH CONFIGURATION FILE\nAn INI file: options as keys of [foliod], "
         "tenants as sections [tenant.\\fINAME\\fR] with the keys:")
for key, text in tenant_keys:
    m.append(f".TP\n\\fB{roff(key)}\\fR\n{roff(text)}")
m.append(""".SH ACCESS
Every endpoint but /health has a caller.  On the Unix socket: the tenant
whose uid is the peer's; an operator uid (\\-\\-operator\\-uids; default 0 and
foliod's own uid) is the operator, who sees every tenant; any other uid is
a tenant of its own or refused (\\-\\-unknown\\-uid).  On TCP: the key in
Authorization (a tenant's api_key, or \\-\\-operator\\-key); no valid key is
401.  /metrics, /v1/kv and /dashboard are the operator's (a tenant gets
403) or show a tenant its own entries (\\-\\-tenant\\-views own).  On TCP a
foreign Host or Origin is 403 and a POST body whose Content\\-Type is not
JSON is 415 (none at all is accepted); the socket accepts any.""")
m.append(""".SH SIGNALS
.TP
.B SIGTERM
drain: stop accepting, let running requests finish (\\-\\-drain\\-timeout\\-ms), exit 0.
.TP
.B SIGINT
as SIGTERM; a second SIGINT exits at once.
.TP
.B SIGHUP
reopen \\-\\-log\\-file and reload the [tenant.NAME] sections of the
configuration file (weights, quotas, uids, keys); running streams are not
disturbed.  Changed [foliod] options are logged and keep their running value.
.SH SYSTEMD
foliod.socket creates the socket (path, mode, group) and foliod inherits it
(socket activation).  foliod.service is Type=notify: READY=1 when serving,
STATUS= with the load, WATCHDOG=1 keep\\-alives (WatchdogSec), STOPPING=1 on
drain.  Without systemd the same binary creates its own socket.
.SH LOGS
One line per event: ISO\\-8601 time and level (text), <N> syslog priorities
when stderr is journald's (JOURNAL_STREAM), or JSON objects
(\\-\\-log\\-format json).  One access line per request: method, path, status,
tenant, prompt/completion/cached tokens, TTFT, duration, finish reason.
.SH FILES
.TP
.I /etc/foliod/foliod.conf
configuration (a commented sample is installed)
.TP
.I /run/foliod/foliod.sock
the socket under systemd
.TP
.I share/foliod/grafana/foliod-dashboard.json, share/foliod/prometheus/foliod-rules.yml
a Grafana dashboard and Prometheus alert rules for /metrics
.SH SEE ALSO
.BR folio (1),
.BR systemd.socket (5)""")
open(out8, "w").write("\n".join(m) + "\n")

# ---- folio: the command table and each command's help -----------------------
top = run(folio, "--help")
cmds = re.findall(r"^  ([a-z-]+)\s+(.*)$", top, re.M)
if len(cmds) < 5:
    sys.exit("gen_docs.py: cannot parse folio --help")
m = []
m.append(f'.TH FOLIO 1 "{DATE}" "foliod {version}" "User Commands"')
m.append(".SH NAME\nfolio \\- tools for foliod: load tests, live view, models, planning")
m.append(".SH SYNOPSIS\n.B folio\n\\fICOMMAND\\fR [\\fIARGS\\fR]")
m.append(".SH COMMANDS")
for name, summary in cmds:
    m.append(f".TP\n\\fB{roff(name)}\\fR\n{roff(summary)}")
for name, _ in cmds:
    text = run(folio, name, "--help")
    m.append(f".SH folio {roff(name).upper()}")
    m.append(".nf")
    m.extend(roff(line) for line in text.rstrip("\n").splitlines())
    m.append(".fi")
m.append(".SH SEE ALSO\n.BR foliod (8)")
open(out1, "w").write("\n".join(m) + "\n")

# ---- the sample configuration --------------------------------------------------
c = ["; foliod.conf — foliod's configuration (INI).  Every key below is one of",
     "; foliod's options (`foliod --help`, foliod(8)) at its default, commented",
     "; out; the command line wins over this file.  `systemctl reload foliod`",
     "; (SIGHUP) reloads the [tenant.NAME] sections; other changes need a restart.",
     "", "[foliod]"]
skip = {"--config", "--help", "--version", "--dump-config", "--socket"}
for name, arg, text, default in options:
    if name in skip:
        continue
    c.append(f"; {text}")
    c.append(f";{name[2:]} = {default if default else ''}".rstrip())
c.append("; --socket: under systemd the socket comes from foliod.socket")
c += ["", "; Tenants: one section each.  A Unix-socket peer is the tenant whose uid",
      "; matches (else its own tenant 'uid-N', or refused: unknown-uid); a TCP",
      "; client the one whose api_key it sends as 'Authorization: Bearer KEY'.",
      "; Who may call what: foliod(8), ACCESS.  Keys:"]
for key, text in tenant_keys:
    c.append(f";   {key:<14} {text}")
c += ["", "; [tenant.alice]", "; uid = 1001", "; weight = 2", "; max_kv_blocks = 4096",
      "; max_running = 16", "; max_waiting = 64", "",
      "; [tenant.batch]", "; api_key = change-me", "; weight = 1", "; max_running = 4", ""]
open(outconf, "w").write("\n".join(c))
