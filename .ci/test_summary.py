"""Turns `bazel test` output into CI's closing line.

Reads the per-target status lines Bazel prints at the end of `bazel test`
(PASSED, FAILED, TIMEOUT, FLAKY, NO STATUS, FAILED TO BUILD, ...) and, for
targets that passed, the JUnit XML Bazel keeps in bazel-testlogs: a target
whose every test case was skipped (a GPU test on a machine without a GPU)
counts as skipped, not passed. Prints `N passed, M failed[, K skipped]` as
its last line and exits 1 if anything failed.

usage: test_summary.py BAZEL_LOG TESTLOGS_DIR
"""
import os
import re
import sys
import xml.etree.ElementTree as ET

STATUS_LINE = re.compile(
    r"^(//\S+)\s+(?:\(cached\)\s+)?"
    r"(PASSED|FAILED TO BUILD|FAILED|TIMEOUT|FLAKY|NO STATUS|INCOMPLETE|REMOTE FAILURE)\b")


def all_cases_skipped(testlogs, label):
    package, _, name = label[2:].partition(":")
    path = os.path.join(testlogs, package, name, "test.xml")
    try:
        cases = ET.parse(path).getroot().iter("testcase")
    except (OSError, ET.ParseError):
        return False
    results = [case.get("result") or ("skipped" if case.find("skipped") is not None else "run")
               for case in cases]
    return bool(results) and all(r == "skipped" for r in results)


def main():
    log_path, testlogs = sys.argv[1], sys.argv[2]
    passed, failed, skipped = [], [], []
    with open(log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = STATUS_LINE.match(line.strip())
            if not match:
                continue
            label, status = match.groups()
            if status == "PASSED":
                (skipped if all_cases_skipped(testlogs, label) else passed).append(label)
            else:
                failed.append(f"{label} ({status})")
    if not (passed or failed or skipped):
        failed.append("bazel reported no test results (did the build fail before testing?)")
    for label in skipped:
        print(f"skipped (every case skipped, e.g. no GPU): {label}")
    for label in failed:
        print(f"failed: {label}")
    closing = f"{len(passed)} passed, {len(failed)} failed"
    if skipped:
        closing += f", {len(skipped)} skipped"
    print(closing)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
