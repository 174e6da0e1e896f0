#!/bin/sh
echo "coverage is not available in this offline build (no remote_coverage_tools); run bazel test without --collect_code_coverage" >&2
exit 1
