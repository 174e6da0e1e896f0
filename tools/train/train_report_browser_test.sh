#!/usr/bin/env bash
# The training report in a real browser: a 4-rank fsdp run with --trace,
# --eval_every and --report_dir, then headless Chromium loads the page
# (its DOM must hold the drawn charts) and takes a screenshot (a PNG of the
# asked size). Where Debian's chromium is not installed it says so and
# skips (apt-get install -y chromium).
# Args: train, the fsdp4 plan.
set -u
train="$1" plan="$2"
work="$(mktemp -d /tmp/loom-train-report.XXXXXXXX)"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }

"$train" --plan="$plan" --nproc=4 --steps=8 --timeout_s=60 --progress=false --eval_every=4 \
    --eval_data=synthetic --trace="$work/trace.json" --report_dir="$work/report" \
    > "$work/train.log" 2>&1 || { cat "$work/train.log" >&2; fail "train exited $?"; }
page="$work/report/train_report.html"
[[ -s "$page" ]] || fail "no $page: $(tail -5 "$work/train.log")"
grep -q "report: $page" "$work/train.log" || fail "the run did not name its report"

browser="$(command -v chromium || command -v chromium-browser || true)"
if [[ -z "$browser" ]]; then
  echo "SKIPPED: chromium is not installed (apt-get install -y chromium); the page was written"
  exit 0
fi
export HOME="$work/home"
flags=(--headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars)
timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$page" > "$work/dom.html" 2> "$work/dom.err" \
    || fail "chromium could not load the page: $(tail -5 "$work/dom.err")"
/usr/bin/python3 - "$work/dom.html" <<'EOF2' || fail "the page as Chromium parsed it"
import sys
dom = open(sys.argv[1]).read()
assert dom.count("<svg") == 7, dom.count("<svg")  # loss, lr, tokens/s, step time, 2 timelines, memory
assert dom.count("<polyline") >= 5, dom.count("<polyline")
assert "held-out loss at step 8" in dom
assert "measured, the last traced step" in dom
EOF2
timeout 120 "$browser" "${flags[@]}" --window-size=1100,2400 --screenshot="$work/shot.png" \
    "file://$page" > "$work/shot.log" 2>&1 || fail "no screenshot: $(tail -5 "$work/shot.log")"
/usr/bin/python3 - "$work/shot.png" <<'EOF2' || fail "bad screenshot"
import struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", data[:8]
width, height = struct.unpack(">II", data[16:24])
assert (width, height) == (1100, 2400), (width, height)
assert len(data) > 50000, len(data)  # a drawn page, not a blank one
EOF2
echo "PASS: Chromium drew the report ($(stat -c %s "$work/shot.png") byte screenshot)"
