#!/usr/bin/env bash
# Plans the tiny model on a 2x2 mesh with //tools:plan, draws it with
# plan-html, and checks the page and the tool's errors.
set -uo pipefail
plan="$1"
plan_html="$2"
dir="$TEST_TMPDIR/plan"
failures=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

"$plan" --model=tiny --batch=4 --seq=16 --mesh=fsdp=2,tp=2 --device=cpu --devices-per-host=4 \
  --out="$dir" >/dev/null || { echo "FAIL //tools:plan could not plan the tiny model"; exit 1; }

out=$("$plan_html" --plan="$dir/plan.json" --out="$dir/page.html" 2>&1)
[[ $? -eq 0 ]] || fail "plan-html: $out"
page="$dir/page.html"
[[ $(grep -o 'class="device"' "$page" | wc -l) -eq 4 ]] || fail "want 4 device rects"
grep -q "<title>Plan: tiny</title>" "$page" || fail "no title"
for legend in "compute: forward" "all_gather" "reduce_scatter" "all_reduce" "optimizer_state"; do
  grep -q "$legend" "$page" || fail "legend lacks $legend"
done
python3 - "$page" <<'PY' || fail "the page is not well-formed XML"
import sys, xml.dom.minidom
text = open(sys.argv[1], encoding="utf-8").read().replace("<!DOCTYPE html>", "", 1)
xml.dom.minidom.parseString(text.encode("utf-8"))
PY

# Without --out the page lands next to the plan.
"$plan_html" --plan="$dir/plan.json" >/dev/null && [[ -s "$dir/plan.html" ]] ||
  fail "default --out is not DIR/plan.html"

out=$("$plan_html" --plan="$dir/missing.json" 2>&1)
[[ $? -eq 1 ]] && grep -q "cannot open plan '.*missing.json'" <<<"$out" || fail "missing file: $out"

python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); del p["predicted"]["breakdown"]; json.dump(p, open(sys.argv[2], "w"))' \
  "$dir/plan.json" "$dir/broken.json"
out=$("$plan_html" --plan="$dir/broken.json" --out="$dir/broken.html" 2>&1)
[[ $? -eq 1 ]] && grep -q "broken.json: \\$.predicted.breakdown: is missing" <<<"$out" ||
  fail "missing field: $out"
[[ -e "$dir/broken.html" ]] && fail "a page was written for a broken plan"

help=$("$plan_html" --help 2>&1)
grep -q -- '--plan (' <<<"$help" || fail "--help does not list --plan: $help"

[[ $failures -eq 0 ]] || { echo "$failures failure(s)"; exit 1; }
echo "all passed"
