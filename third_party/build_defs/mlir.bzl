"""gentbl: runs mlir-tblgen over an ODS (.td) file, as MLIR's own Bazel build does.

Each (flags, output) pair becomes one mlir-tblgen run; the outputs are bundled
in a cc_library of textual headers that the dialect's C++ includes.
"""

def gentbl(name, td_file, tbl_outs, td_srcs = [], **kwargs):
    """Generates .inc files from an ODS file.

    Args:
      name: cc_library exposing the generated files as textual headers.
      td_file: the .td file given to mlir-tblgen.
      tbl_outs: list of (flags, output file) pairs, e.g.
        [(["-gen-op-decls"], "ops.h.inc"), (["-gen-op-defs"], "ops.cpp.inc")].
      td_srcs: other project .td files that td_file includes.
      **kwargs: passed to the cc_library (visibility, testonly, ...).
    """
    outs = []
    for flags, out in tbl_outs:
        rule_name = "%s_%s" % (name, out.replace("/", "_").replace(".", "_"))
        native.genrule(
            name = rule_name,
            srcs = [td_file] + td_srcs + ["@llvm//:mlir_td_files"],
            outs = [out],
            tools = ["@llvm//:bin/mlir-tblgen"],
            cmd = " ".join([
                "$(location @llvm//:bin/mlir-tblgen)",
                " ".join(flags),
                "-I external/llvm/include",
                "-I .",
                "-I $$(dirname $(location %s))" % td_file,
                "$(location %s)" % td_file,
                "-o $@",
            ]),
            message = "mlir-tblgen %s %s" % (" ".join(flags), out),
            testonly = kwargs.get("testonly", False),
        )
        outs.append(out)
    native.cc_library(
        name = name,
        textual_hdrs = outs,
        **kwargs
    )
