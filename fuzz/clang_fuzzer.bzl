"""clang_fuzzer: builds a libFuzzer binary with clang inside the gcc build.

The project builds with Bazel's auto-configured gcc toolchain, and gcc has
no libFuzzer. Rather than a second toolchain (a `--config` that would
rebuild the whole tree with clang in another output base), this rule runs
/usr/bin/clang++ itself, as cuda_library runs nvcc:

* `srcs` (the harness) and `instrument` (the sources under test, e.g.
  //comm:tcp_store_server.cc) are compiled by clang with
  -fsanitize=fuzzer-no-link,address,undefined, one action per file, with the
  include paths, defines and headers of `deps`;
* everything else is linked from the gcc-built archives of `deps`, except the
  libraries named in `replaces`, whose sources `instrument` supplies: the code
  under test is instrumented, the rest (Abseil, MLIR, helpers) is not.

Where clang++ or Debian's libclang_rt.fuzzer is missing, or the build is
itself sanitized (--config=asan and friends), every action still succeeds
and the "binary" is a script that exits 77, which run_fuzzer.sh reports as a
skipped test with the reason. docs/reliability.md explains the choice.
"""

_CLANG = "/usr/bin/clang++"

_SANITIZE = [
    "-fsanitize=fuzzer-no-link,address,undefined",
    # The vptr check needs the typeinfo of every polymorphic class, and
    # Debian's LLVM/MLIR are built without RTTI.
    "-fno-sanitize=vptr",
    "-fno-sanitize-recover=undefined",
]

_COPTS = [
    "-std=c++20",
    "-O1",
    "-gline-tables-only",
    "-fno-omit-frame-pointer",
    "-Wall",
    "-Wextra",
    # clang 14 warns where gcc does not; the gcc build keeps -Werror.
    "-Wno-unused-command-line-argument",
]

# $1: output; $2: "compile" or "link"; the rest: clang's arguments. Without
# clang or libFuzzer, writes an empty object, or a stub binary that exits 77
# (skipped) saying what is missing.
_BUILD_OR_STUB = """
out="$1"; mode="$2"; shift 2
missing=""
[ -x {clang} ] || missing="{clang} is not installed (Debian package clang)"
if [ -z "$missing" ]; then
  lib=$({clang} -print-resource-dir)/lib/linux/libclang_rt.fuzzer-x86_64.a
  [ -f "$lib" ] || missing="clang has no libFuzzer runtime ($lib; Debian package libclang-rt-14-dev)"
fi
if [ -n "$missing" ]; then
  if [ "$mode" = link ]; then
    printf '#!/bin/sh\\necho "fuzzer not built: %s" >&2\\nexit 77\\n' "$missing" > "$out"
    chmod +x "$out"
  else
    : > "$out"
  fi
  exit 0
fi
exec {clang} "$@"
""".format(clang = _CLANG)

def _library_file(library):
    for f in [library.pic_static_library, library.static_library, library.dynamic_library]:
        if f != None:
            return f
    return None

def _stub(ctx, reason):
    binary = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.write(
        output = binary,
        content = '#!/bin/sh\necho "fuzzer not built: %s" >&2\nexit 77\n' % reason,
        is_executable = True,
    )
    return [DefaultInfo(files = depset([binary]), executable = binary)]

def _clang_fuzzer_impl(ctx):
    # Under --config=asan|ubsan|tsan the gcc-built archives carry gcc's
    # sanitizer instrumentation, which clang's runtime cannot host; the
    # fuzzers bring their own ASan+UBSan anyway.
    if [c for c in ctx.fragments.cpp.copts if c.startswith("-fsanitize")]:
        return _stub(ctx, "the build itself is sanitized (--config=asan/ubsan/tsan); fuzzers carry their own ASan+UBSan, run them in the normal build")
    cc_info = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    comp = cc_info.compilation_context

    include_flags = ["-iquote", ".", "-iquote", ctx.bin_dir.path]
    include_flags += ["-I" + p for p in comp.includes.to_list()]
    for p in comp.quote_includes.to_list():
        include_flags += ["-iquote", p]
    for p in comp.system_includes.to_list():
        include_flags += ["-isystem", p]
    include_flags += ["-D" + d for d in comp.defines.to_list()]

    objects = []
    for src in ctx.files.srcs + ctx.files.instrument:
        obj = ctx.actions.declare_file("_fuzz_objs/%s/%s.o" % (ctx.label.name, src.short_path.replace("/", "_")))
        ctx.actions.run_shell(
            command = _BUILD_OR_STUB,
            arguments = [obj.path, "compile"] + _COPTS + _SANITIZE + ctx.attr.copts + include_flags +
                        ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [comp.headers]),
            outputs = [obj],
            mnemonic = "ClangFuzzCompile",
            progress_message = "clang (fuzzer) %s" % src.short_path,
        )
        objects.append(obj)

    # Labels as strings, not dependencies: a replaced library may be private
    # to its package (//comm:tcp_store_protocol), and only its owner label
    # is compared.
    replaced = [str(Label(r)) for r in ctx.attr.replaces]
    archives = []
    link_flags = []
    for linker_input in cc_info.linking_context.linker_inputs.to_list():
        link_flags += linker_input.user_link_flags
        if str(linker_input.owner) in replaced:
            continue
        for library in linker_input.libraries:
            f = _library_file(library)
            if f == None:
                continue
            if library.alwayslink:
                archives += ["-Wl,--whole-archive", f, "-Wl,--no-whole-archive"]
            else:
                archives.append(f)
    library_files = [a for a in archives if type(a) != "string"]

    binary = ctx.actions.declare_file(ctx.label.name)
    args = ctx.actions.args()
    args.add(binary.path)
    args.add("link")
    args.add_all(_SANITIZE)
    args.add("-fsanitize=fuzzer")
    args.add_all(objects)
    args.add("-Wl,--start-group")
    args.add_all(archives)
    args.add("-Wl,--end-group")
    args.add_all(link_flags)
    args.add_all(["-lstdc++", "-lm", "-lpthread", "-o", binary.path])
    ctx.actions.run_shell(
        command = _BUILD_OR_STUB,
        arguments = [args],
        inputs = objects + library_files,
        outputs = [binary],
        mnemonic = "ClangFuzzLink",
        progress_message = "clang (fuzzer) linking %s" % binary.short_path,
    )
    return [DefaultInfo(files = depset([binary]), executable = binary)]

clang_fuzzer = rule(
    implementation = _clang_fuzzer_impl,
    executable = True,
    fragments = ["cpp"],
    attrs = {
        "srcs": attr.label_list(allow_files = [".cc"], mandatory = True),
        "instrument": attr.label_list(allow_files = [".cc"]),
        "replaces": attr.string_list(),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
    },
)
