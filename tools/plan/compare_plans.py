#!/usr/bin/python3
"""Compares two sets of plan.json files up to buffer renumbering.

A planner change that only moves work between passes and the exporter must
leave plans equivalent. Buffer ids are positions in `buffers`, so they change
whenever a buffer moves (e.g. optimizer states that used to be appended last
now come from function arguments); this script compares what the ids stand
for instead:

  * buffers by name (every field but `id`);
  * instructions per phase, in order, by op, stream, attrs and the *names* of
    their operand and result buffers (plus index, start_s and duration_s);
  * `interface` with its buffer ids replaced by names;
  * every other top-level field (mesh, topology, strategies, predicted, ...)
    as it is.

Plans of format 1 and 2 compare: both are first put in one form
(`normalized`). Format 2's blocks `forward`, `backward` and `optimizer` of
its one program become format 1's phases; what format 2 states differently
without changing its meaning is mapped back: a collective's `kind` (now the
op table's), AdamW's `betas` pair (now `beta1`, `beta2`), a reduction's
number (now its name), flags written as false (now left out), and
`format_version`, `micro_batches`. `live` changed meaning (format 1: op
indices of the function; format 2: positions in the program's instruction
order), so compare it with `--ignore buffer.live` across formats.

Usage:

  /usr/bin/python3 tools/plan/compare_plans.py BEFORE AFTER [--ignore FIELD]...

BEFORE and AFTER are plan.json files or directories; for directories every
`*/plan.json` under BEFORE is compared with the same relative path under
AFTER. `--ignore` drops a field from the comparison: `buffer.live`,
`instruction.index`, `predicted.peak_index`, ... (KIND.KEY, where KIND is
buffer, instruction, interface, or a top-level key). Numbers compare exactly
unless `--rtol` is given. Prints each difference (the first few per kind and
file) and a summary; exits 1 when any remain, 0 otherwise.
"""

import argparse
import collections
import json
import math
import pathlib
import sys


def numbers_equal(a, b, rtol):
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if rtol == 0:
            return a == b
        return math.isclose(a, b, rel_tol=rtol, abs_tol=0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(numbers_equal(x, y, rtol) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(numbers_equal(a[k], b[k], rtol) for k in a)
    return a == b


class Comparison:
    def __init__(self, ignore, rtol, limit):
        self.ignore = set(ignore)
        self.rtol = rtol
        self.limit = limit
        self.counts = collections.Counter()
        self.shown = collections.Counter()

    def differ(self, where, kind, before, after):
        self.counts[kind] += 1
        key = (where, kind)
        self.shown[key] += 1
        if self.shown[key] <= self.limit:
            print(f"{where}: {kind}: {json.dumps(before)} -> {json.dumps(after)}")

    def fields(self, where, kind, before, after):
        for key in sorted(set(before) | set(after)):
            if f"{kind}.{key}" in self.ignore:
                continue
            a, b = before.get(key), after.get(key)
            if not numbers_equal(a, b, self.rtol):
                self.differ(where, f"{kind}.{key}", a, b)


REDUCTIONS = ["sum", "avg", "max", "min"]


def normalized_attrs(attrs):
    out = {}
    for key, value in attrs.items():
        if key == "kind" or value is False:
            continue
        if key == "betas":
            out["beta1"], out["beta2"] = value
        elif key == "reduction" and isinstance(value, int):
            out[key] = REDUCTIONS[value]
        else:
            out[key] = value
    return out


def normalized(plan):
    """Format 1 and 2 in one form: format 1's phases, normalized attrs."""
    plan = dict(plan)
    if "programs" in plan:
        (program,) = plan.pop("programs")
        plan["phases"] = {block["phase"]: block["instructions"] for block in program["blocks"]}
    for key in ("format_version", "micro_batches"):
        plan.pop(key, None)
    plan["phases"] = {
        phase: [dict(instruction, attrs=normalized_attrs(instruction.get("attrs", {})))
                for instruction in instructions]
        for phase, instructions in plan["phases"].items()}
    return plan


def named_buffers(plan, where):
    names = [buffer["name"] for buffer in plan["buffers"]]
    duplicates = [n for n, c in collections.Counter(names).items() if c > 1]
    if duplicates:
        sys.exit(f"{where}: buffer names are not unique: {duplicates[:5]}")
    return names


def canonical_instruction(instruction, names):
    out = dict(instruction)
    out["operands"] = [names[i] for i in instruction["operands"]]
    out["results"] = [names[i] for i in instruction["results"]]
    return out


def compare_plans(where, before, after, comparison):
    names_before = named_buffers(before, where + " (before)")
    names_after = named_buffers(after, where + " (after)")
    by_name_after = {b["name"]: b for b in after["buffers"]}
    for buffer in before["buffers"]:
        other = by_name_after.get(buffer["name"])
        if other is None:
            comparison.differ(where, "buffer missing after", buffer["name"], None)
            continue
        a = {k: v for k, v in buffer.items() if k != "id"}
        b = {k: v for k, v in other.items() if k != "id"}
        comparison.fields(f"{where} buffer {buffer['name']}", "buffer", a, b)
    for name in sorted(set(names_after) - set(names_before)):
        comparison.differ(where, "buffer added after", None, name)

    for phase in sorted(set(before["phases"]) | set(after["phases"])):
        list_before = before["phases"].get(phase, [])
        list_after = after["phases"].get(phase, [])
        if len(list_before) != len(list_after):
            comparison.differ(where, f"phase {phase} length", len(list_before), len(list_after))
        for i, (a, b) in enumerate(zip(list_before, list_after)):
            comparison.fields(f"{where} {phase}[{i}] {a['op']}", "instruction",
                              canonical_instruction(a, names_before),
                              canonical_instruction(b, names_after))

    def interface(plan, names):
        return {k: names[v] if isinstance(v, int) and k != "vocab" else v
                for k, v in plan.get("interface", {}).items()}

    comparison.fields(f"{where} interface", "interface", interface(before, names_before),
                      interface(after, names_after))
    for key in sorted(set(before) | set(after)):
        if key in ("buffers", "phases", "interface") or key in comparison.ignore:
            continue
        a, b = before.get(key), after.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            comparison.fields(f"{where} {key}", key, a, b)
        elif not numbers_equal(a, b, comparison.rtol):
            comparison.differ(where, key, a, b)


def pairs(before, after):
    before, after = pathlib.Path(before), pathlib.Path(after)
    if before.is_file():
        return [(str(before), before, after)]
    out = []
    for path in sorted(before.glob("*/plan.json")):
        relative = path.relative_to(before)
        out.append((str(relative.parent), path, after / relative))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--ignore", action="append", default=[],
                        help="a field to skip, e.g. buffer.live or instruction.index")
    parser.add_argument("--rtol", type=float, default=0.0,
                        help="relative tolerance for numbers (default: exact)")
    parser.add_argument("--limit", type=int, default=5,
                        help="differences printed per kind and plan (default 5)")
    args = parser.parse_args()
    comparison = Comparison(args.ignore, args.rtol, args.limit)
    compared = 0
    for where, path_before, path_after in pairs(args.before, args.after):
        if not path_after.exists():
            comparison.differ(where, "plan missing after", str(path_before), None)
            continue
        with open(path_before) as f:
            plan_before = json.load(f)
        with open(path_after) as f:
            plan_after = json.load(f)
        compare_plans(where, normalized(plan_before), normalized(plan_after), comparison)
        compared += 1
    print(f"compared {compared} plan(s)")
    if not comparison.counts:
        print("no differences besides buffer renumbering")
        return 0
    print("differences by kind:")
    for kind, count in sorted(comparison.counts.items()):
        print(f"  {kind}: {count}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
