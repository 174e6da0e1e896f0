"""lit_tests: one Bazel test per lit test file, so no case can silently drop out.

Each test runs LLVM's lit on a single file with FileCheck, not, split-file and
the given tools on PATH. A test_suite named `name` groups them.
"""

_LLVM_TOOLS = [
    "@llvm//:bin/FileCheck",
    "@llvm//:bin/lit",
    "@llvm//:bin/not",
    "@llvm//:bin/split-file",
]

def lit_tests(name, srcs, tools, data = [], size = "small", tags = []):
    """Declares `<file>.test` for every file in srcs, plus a suite `name`.

    Args:
      name: test_suite that holds every generated test.
      srcs: lit test files (usually a glob of *.mlir).
      tools: binaries the RUN lines call (e.g. //tools:plan-opt).
      data: other files the tests read.
      size: Bazel test size of each test.
      tags: tags for each test.
    """
    tests = []
    for src in srcs:
        test_name = src + ".test"
        native.sh_test(
            name = test_name,
            srcs = ["//third_party/build_defs:lit_runner.sh"],
            args = [
                "$(rootpath //third_party/build_defs:lit.cfg.py)",
                "$(rootpath %s)" % src,
            ] + ["$(rootpath %s)" % t for t in tools + _LLVM_TOOLS],
            data = [src, "//third_party/build_defs:lit.cfg.py"] + tools + _LLVM_TOOLS + data,
            size = size,
            tags = tags,
        )
        tests.append(test_name)
    native.test_suite(name = name, tests = tests, tags = tags)
