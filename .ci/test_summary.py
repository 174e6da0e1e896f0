"""Turns `bazel test` output into CI's closing line.

Reads the per-target status lines Bazel prints at the end of `bazel test`
(PASSED, FAILED, TIMEOUT, FLAKY, NO STATUS, FAILED TO BUILD, ...) and, for
targets that passed, the JUnit XML Bazel keeps in bazel-testlogs: a target
whose every test case was skipped (a GPU test on a machine without a GPU)
counts as skipped, not passed. Prints `N passed, M failed[, K skipped]` as
its last line and exits 1 if anything failed.

Further runs (CI's sanitizer pass) follow as `--pass=NAME LOG TESTLOGS`;
their targets count too, labelled `//x:y [NAME]`, so the one closing line
covers every run.

usage: test_summary.py BAZEL_LOG TESTLOGS_DIR [--pass=NAME LOG TESTLOGS_DIR]...
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


def read_run(log_path, testlogs, tag, passed, failed, skipped):
    """Adds one `bazel test` run's targets to the three lists."""
    found = False
    with open(log_path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = STATUS_LINE.match(line.strip())
            if not match:
                continue
            found = True
            label, status = match.groups()
            name = f"{label} [{tag}]" if tag else label
            if status == "PASSED":
                (skipped if all_cases_skipped(testlogs, label) else passed).append(name)
            else:
                failed.append(f"{name} ({status})")
    if not found:
        what = f"the {tag} run" if tag else "bazel"
        failed.append(f"{what} reported no test results (did the build fail before testing?)")


def main():
    args = sys.argv[1:]
    runs = [("", args[0], args[1])]
    rest = args[2:]
    while rest:
        if not rest[0].startswith("--pass=") or len(rest) < 3:
            sys.exit("usage: test_summary.py BAZEL_LOG TESTLOGS_DIR [--pass=NAME LOG TESTLOGS_DIR]...")
        runs.append((rest[0][len("--pass="):], rest[1], rest[2]))
        rest = rest[3:]
    passed, failed, skipped = [], [], []
    for tag, log_path, testlogs in runs:
        read_run(log_path, testlogs, tag, passed, failed, skipped)
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
