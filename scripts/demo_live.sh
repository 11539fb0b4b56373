#!/usr/bin/env bash
# `make demo-live`: spadeopt on live data, start to finish (~5-7 min on the shared 2-core VM).
# Starts the project's broker if it is not running, feeds orders onto 4 stream keys at a
# steady rate, profiles the live app for 15 s (profile --duration), lets FATM plan it,
# runs the FATM build on the live feed (status line: each source's lag, each sink's
# count), stops it with SIGTERM as a user's Ctrl-C would (it drains and exits 0), shows
# the last totals, measures event -> sink latency, and stops everything it started.
set -euo pipefail
BIN=${BIN:-.venv/bin}
OUT=${OUT:-out/demo-live}
PREFIX=${PREFIX:-demo-live}
RATE=${RATE:-2000}
broker_started=0
feeder=""
run=""

cleanup() {
  if [[ -n $run ]] && kill -0 "$run" 2>/dev/null; then kill -TERM "$run"; wait "$run" || true; fi
  if [[ -n $feeder ]] && kill -0 "$feeder" 2>/dev/null; then kill -TERM "$feeder"; wait "$feeder" || true; fi
  "$BIN/python" -m apps.orders clear --prefix "$PREFIX" >/dev/null 2>&1 || true
  if (( broker_started )); then "$BIN/spadeopt" broker stop; fi
}
trap cleanup EXIT

if ! "$BIN/spadeopt" broker status >/dev/null 2>&1; then
  make -s broker
  broker_started=1
fi
mkdir -p "$OUT"
"$BIN/python" -m apps.orders clear --prefix "$PREFIX"

echo "== a live feed: $RATE orders/s onto $PREFIX:0..3, by customer (python -m apps.orders feed --rate $RATE)"
"$BIN/python" -m apps.orders feed --rate "$RATE" --prefix "$PREFIX" &
feeder=$!

echo "== stage 1 on the live streams: profile FALL for 15 s (until= makes the source live and unbounded)"
run_dir="$OUT/profile-run-$(date +%Y%m%d-%H%M%S)"
"$BIN/spadeopt" profile apps/orders.py -p until= -p prefix="$PREFIX" --fusion all --duration 15 \
  --sample-rate 0.05 --no-production-probe -o "$run_dir"
"$BIN/spadeopt" refine "$run_dir" -o "$OUT/profile.json"
echo "== stage 2: FATM plans the live app from that profile"
"$BIN/spadeopt" optimize apps/orders.py --profile "$OUT/profile.json" -p until= -p prefix="$PREFIX" \
  -o "$OUT/build-auto"

echo "== FATM on the live feed (streams emptied first: what the profile read is not read again)"
echo "   lag = entries behind the streams' ends: the feed of Spark's start-up, then ~0; SIGTERM after 20 s"
"$BIN/python" -m apps.orders clear --prefix "$PREFIX" >/dev/null
"$BIN/spadeopt" run "$OUT/build-auto" --json "$OUT/run.json" &
run=$!
for _ in $(seq 1 240); do   # until every PE reports (Spark starts in 10-60 s on a busy machine)
  up=$( (ls "$OUT/build-auto/progress/"pe*.json 2>/dev/null || true) | wc -l)
  pes=$(ls "$OUT/build-auto/"pe*.py | wc -l)
  (( up >= pes )) && break
  sleep 0.5
done
sleep 20
kill -TERM "$run"
code=0
wait "$run" || code=$?
run=""
echo "== the run ended with exit code $code (0: a live run's normal end: drained, windows closed, sinks flushed)"
kill -TERM "$feeder"; wait "$feeder" || true
feeder=""
echo "== the last totals on $PREFIX:totals"
"$BIN/python" -m apps.orders show --prefix "$PREFIX"

echo "== latency: event -> sink through broker -> 3 PEs -> broker (and Bytewax, when installed)"
"$BIN/spadeopt" bench latency --quick --out "$OUT/latency" >/dev/null
"$BIN/python" - "$OUT/latency/latency.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
for engine, rows in doc["engines"].items():
    for r in rows:
        print(f"  {engine:<9} {r['achieved_rate']:>8,.0f} events/s  p50 {r['p50_ms']:>6.1f} ms  "
              f"p99 {r['p99_ms']:>6.1f} ms  max {r['max_ms']:>6.1f} ms")
print(f"  (figures: {sys.argv[1]}; load average {rows[-1]['load_average']}: the machine is shared)")
PY
exit "$code"
