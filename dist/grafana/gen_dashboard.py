#!/usr/bin/env python3
"""dist/grafana/gen_dashboard.py — writes foliod-dashboard.json (run by hand
after editing the panels below; the JSON is checked in and installed).
Every expression is checked against a real Prometheus scraping foliod by
tests/integration/ops/test_prometheus.sh."""
import json
import os

SEL = 'model_name=~"$model", instance=~"$instance"'
RI = "$__rate_interval"


def q(expr, legend):
    return {"expr": expr, "legendFormat": legend}


def quantiles(metric, what):
    return [q(f'histogram_quantile({p}, sum by (le) (rate({metric}_bucket{{{SEL}}}[{RI}])))',
              f"{what} p{int(p * 100)}") for p in (0.5, 0.9, 0.99)]


PANELS = [
    # (title, type, unit, targets, width, stacked)
    ("KV cache used", "gauge", "percentunit",
     [q(f'folio_kv_cache_usage_ratio{{{SEL}}}', "{{instance}}")], 6, False),
    ("KV blocks by state", "timeseries", "short",
     [q(f'folio_kv_blocks_used{{{SEL}}}', "used"),
      q(f'folio_kv_blocks_cached{{{SEL}}}', "cached"),
      q(f'folio_kv_blocks_free{{{SEL}}}', "free")], 9, True),
    ("KV tokens held vs empty slots", "timeseries", "short",
     [q(f'folio_kv_tokens_held{{{SEL}}}', "tokens held"),
      q(f'folio_kv_slots_empty{{{SEL}}}', "allocated, empty")], 9, True),
    ("Requests: running, waiting, preempted", "timeseries", "short",
     [q(f'folio_num_requests_running{{{SEL}}}', "running"),
      q(f'folio_num_requests_waiting{{{SEL}}}', "waiting"),
      q(f'folio_num_requests_preempted{{{SEL}}}', "preempted")], 8, False),
    ("Preemptions per second", "timeseries", "ops",
     [q(f'rate(folio_num_preemptions_total{{{SEL}}}[{RI}])', "preemptions/s")], 8, False),
    ("Tokens per second", "timeseries", "short",
     [q(f'rate(folio_prompt_tokens_total{{{SEL}}}[{RI}])', "prompt"),
      q(f'rate(folio_generation_tokens_total{{{SEL}}}[{RI}])', "generated")], 8, False),
    ("Time to first token", "timeseries", "s",
     quantiles("folio_time_to_first_token_seconds", "TTFT"), 12, False),
    ("Inter-token latency", "timeseries", "s",
     quantiles("folio_inter_token_latency_seconds", "ITL"), 12, False),
    ("Tenant share of the KV pool", "timeseries", "percentunit",
     [q(f'folio_tenant_kv_blocks_used{{{SEL}}} / ignoring (tenant) group_left '
        f'folio_kv_num_blocks{{{SEL}}}', "{{tenant}}")], 8, True),
    ("Tenant generated tokens per second", "timeseries", "short",
     [q(f'sum by (tenant) (rate(folio_tenant_generation_tokens_total{{{SEL}}}[{RI}]))',
        "{{tenant}}")], 8, True),
    ("Tenant queues", "timeseries", "short",
     [q(f'folio_tenant_requests_running{{{SEL}}}', "{{tenant}} running"),
      q(f'folio_tenant_requests_waiting{{{SEL}}}', "{{tenant}} waiting")], 8, False),
    ("429 responses per second (tenant queue full)", "timeseries", "ops",
     [q(f'sum by (tenant) (rate(folio_tenant_rejected_requests_total{{{SEL}}}[{RI}]))',
        "{{tenant}}")], 8, False),
    ("Prefill and decode time per sequence (p50, p99)", "timeseries", "s",
     [q(f'histogram_quantile({p}, sum by (le) (rate(folio_request_{k}_time_seconds_bucket{{{SEL}}}[{RI}])))',
        f"{k} p{int(p * 100)}") for k in ("prefill", "decode") for p in (0.5, 0.99)], 8, False),
    ("Request lengths (mean tokens)", "timeseries", "short",
     [q(f'rate(folio_request_{k}_tokens_sum{{{SEL}}}[{RI}]) / rate(folio_request_{k}_tokens_count{{{SEL}}}[{RI}])',
        k) for k in ("prompt", "generation")], 8, False),
    ("Process: resident memory and CPU", "timeseries", "bytes",
     [q('process_resident_memory_bytes{instance=~"$instance"}', "RSS"),
      q('rate(process_cpu_seconds_total{instance=~"$instance"}[$__rate_interval])', "CPU cores")],
     8, False),
]


def panel(i, x, y, title, typ, unit, targets, w, stacked):
    p = {
        "id": i + 1, "title": title, "type": typ,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"x": x, "y": y, "w": w, "h": 8},
        "targets": [dict(t, refId=chr(ord("A") + k), datasource={"type": "prometheus", "uid": "${datasource}"})
                    for k, t in enumerate(targets)],
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "bottom", "calcs": ["lastNotNull", "max"]},
                    "tooltip": {"mode": "multi"}},
    }
    if typ == "gauge":
        p["fieldConfig"]["defaults"].update({"min": 0, "max": 1, "thresholds": {"mode": "absolute", "steps": [
            {"color": "green", "value": None}, {"color": "orange", "value": 0.85}, {"color": "red", "value": 0.95}]}})
        p["options"] = {"reduceOptions": {"calcs": ["lastNotNull"]}}
    elif stacked:
        p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal"}, "fillOpacity": 40}
    return p


panels, x, y = [], 0, 0
for i, (title, typ, unit, targets, w, stacked) in enumerate(PANELS):
    if x + w > 24:
        x, y = 0, y + 8
    panels.append(panel(i, x, y, title, typ, unit, targets, w, stacked))
    x += w

dash = {
    "title": "foliod",
    "uid": "foliod",
    "description": "foliod: KV cache, queues, throughput, latency, tenants (share/foliod/grafana)",
    "tags": ["foliod", "llm"],
    "schemaVersion": 39,
    "version": 1,
    "editable": True,
    "time": {"from": "now-1h", "to": "now"},
    "refresh": "10s",
    "templating": {"list": [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Prometheus"},
        {"name": "model", "type": "query", "label": "model",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(folio_build_info, model_name)", "refId": "model"},
         "definition": "label_values(folio_build_info, model_name)",
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
         "current": {"text": "All", "value": "$__all"}},
        {"name": "instance", "type": "query", "label": "instance",
         "datasource": {"type": "prometheus", "uid": "${datasource}"},
         "query": {"query": "label_values(folio_build_info{model_name=~\"$model\"}, instance)", "refId": "instance"},
         "definition": "label_values(folio_build_info{model_name=~\"$model\"}, instance)",
         "includeAll": True, "multi": True, "allValue": ".*", "refresh": 2,
         "current": {"text": "All", "value": "$__all"}},
    ]},
    "panels": panels,
}
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "foliod-dashboard.json")
with open(out, "w") as f:
    json.dump(dash, f, indent=2)
    f.write("\n")
