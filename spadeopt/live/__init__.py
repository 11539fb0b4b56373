"""See a running job: what the driver knows of it, as Prometheus metrics (``prometheus``),
an HTTP server with a web page (``server``, page in ``page/``) and a terminal view
(``top``; ``spadeopt top URL``). Runtime side: the driver (``spadeopt.deploy``) imports
it; it imports nothing of the compiler. Everything here reads one *state dict*, which the
driver makes from its live metrics (``deploy.live_metrics``, ``deploy.live_state``, where
each field's meaning is spelled out) while a run goes on (any section may be empty,
``None`` where unknown)::

    {"app": "bargain", "strategy": "auto", "status": "starting" | "running" | "done" | "failed",
     "started": 1764330000.0, "now": 1764330012.5,
     "nodes": [{"node": 0, "host": "127.0.0.1"}],
     "pes": [{"pe": "pe0", "node": 0, "operators": ["src", "f"], "up": True, "done": False,
              "cpu_seconds": 3.2, "cpu": 0.93,           # total; cores used over the last interval
              "busy": 0.9, "idle": 0.05, "backpressure": 0.05,   # fractions of the last interval
              "busy_seconds": 3.0, "idle_seconds": 0.4, "backpressure_seconds": 0.3,   # totals
              "tuples_in": 120000, "tuples_out": 118000, "rate_in": 40000.0, "rate_out": 39000.0,
              "queued": 1200, "restarts": 0}],
     "operators": [{"operator": "f", "pe": "pe0", "tuples_in": 120000, "tuples_out": 118000,
                    "rate_in": 40000.0, "rate_out": 39000.0, "counters": {"late": 12}}],
     "links": [{"link": "pe0>pe1", "from_pe": "pe0", "to_pe": "pe1", "port": "f.out",
                "tuples": 118000, "bytes": 3400000, "rate": 39000.0, "bytes_rate": 1.1e6}],
     "sources": [{"source": "src", "pe": "pe0", "tuples": 120000, "rate": 40000.0, "lag": None,
                  "live": False}],
     "sinks": [{"sink": "out", "tuples": 500, "rate": 160.0}],
     "latency": {"count": 40, "sum_ms": 180.0, "buckets_ms": [[1, 3], [2.5, 10], ..., ["+Inf", 40]],
                 "p50_ms": 4.1, "p99_ms": 12.0} | None,        # buckets cumulative
     "checkpoints": {"taken": 3, "last_id": 3, "last_duration_s": 0.4, "last_bytes": 20480, "age_s": 1.2,
                     "duration_seconds_total": 1.1, "bytes_total": 61440} | None,
     "adaptive": {"phase": 1 | 2, "plan": "auto, 3 PE(s), widths {'keyed': 2}",   # run --adaptive only
                  "switch": "switched at checkpoint 4 from all (...)", "why": "FATM is predicted ...",
                  "checkpoint": 4, "predicted": {...}} | None,
     "restarts": 0,
     "bottleneck": "pe3" | None}
"""
