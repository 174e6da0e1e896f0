"""cuda_library: compiles .cu files with nvcc into a cc_library.

Bazel has no CUDA rule. Each .cu file is compiled by its own nvcc action
(position-independent, whole-program device code, so no device-link step),
the objects are archived with `nvcc -lib`, and the archive plus the CUDA
runtime become an ordinary cc_library that any cc_binary or cc_test can
depend on. Device code targets Hopper (sm_90 SASS) and also carries
compute_90 PTX, which the driver JIT-compiles for newer GPUs.
"""

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

_NVCC_FLAGS = [
    "-std=c++20",
    "-O3",
    "-ccbin=/usr/bin/g++",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall,-Wextra",
    "-Werror=all-warnings",
]

# nvcc finds cicc, ptxas and its headers relative to its own location, so it
# runs from its real path in the toolkit, not through the repository symlink
# (whose siblings the sandbox does not hold).
_RUN_NVCC = 'nvcc="$(readlink -f "$1")"; shift; exec "$nvcc" "$@"'

# The host compiler calls `as` and `ar` through PATH.
_NVCC_ENV = {"PATH": "/usr/bin:/bin"}

def _cuda_archive_impl(ctx):
    contexts = [dep[CcInfo].compilation_context for dep in ctx.attr.deps]
    headers = depset(ctx.files.hdrs, transitive = [c.headers for c in contexts])

    include_flags = ["-I.", "-I" + ctx.bin_dir.path]
    for c in contexts:
        include_flags += ["-I" + p for p in c.includes.to_list()]
        include_flags += ["-I" + p for p in c.quote_includes.to_list()]
        include_flags += ["-isystem=" + p for p in c.system_includes.to_list()]
        include_flags += ["-D" + d for d in c.defines.to_list()]

    objects = []
    for src in ctx.files.srcs:
        obj = ctx.actions.declare_file("_cuda_objs/%s/%s.o" % (ctx.label.name, src.basename[:-len(".cu")]))
        ctx.actions.run_shell(
            command = _RUN_NVCC,
            tools = [ctx.executable._nvcc],
            arguments = [ctx.executable._nvcc.path] + _NVCC_FLAGS + CUDA_ARCH_FLAGS + ctx.attr.copts + include_flags +
                        ["-c", src.path, "-o", obj.path],
            inputs = depset([src], transitive = [headers]),
            outputs = [obj],
            env = _NVCC_ENV,
            mnemonic = "NvccCompile",
            progress_message = "nvcc %s" % src.short_path,
        )
        objects.append(obj)

    archive = ctx.actions.declare_file("lib%s.a" % ctx.label.name)
    ctx.actions.run_shell(
        command = _RUN_NVCC,
        tools = [ctx.executable._nvcc],
        arguments = [ctx.executable._nvcc.path, "-lib", "-o", archive.path] + [o.path for o in objects],
        inputs = objects,
        outputs = [archive],
        env = _NVCC_ENV,
        mnemonic = "NvccArchive",
        progress_message = "nvcc -lib %s" % archive.short_path,
    )
    return [DefaultInfo(files = depset([archive]))]

_cuda_archive = rule(
    implementation = _cuda_archive_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".cu"], mandatory = True),
        "hdrs": attr.label_list(allow_files = [".h", ".cuh"]),
        "deps": attr.label_list(providers = [CcInfo]),
        "copts": attr.string_list(),
        "_nvcc": attr.label(
            default = Label("@cuda//:bin/nvcc"),
            allow_single_file = True,
            executable = True,
            cfg = "exec",
        ),
    },
)

def cuda_library(name, srcs, hdrs = [], deps = [], copts = [], **kwargs):
    """A cc_library whose sources are CUDA (.cu) files.

    Args:
      name: target name; dependents use it like any cc_library.
      srcs: .cu files.
      hdrs: headers the .cu files and the library's users include.
      deps: cc_library dependencies visible to both nvcc and the host code.
      copts: extra nvcc flags.
      **kwargs: passed to the cc_library (visibility, testonly, ...).
    """
    _cuda_archive(
        name = name + "_cuda_archive",
        srcs = srcs,
        hdrs = hdrs,
        deps = deps + ["@cuda//:cuda_headers"],
        copts = copts,
        testonly = kwargs.get("testonly", False),
        visibility = ["//visibility:private"],
    )
    native.cc_library(
        name = name,
        srcs = [":" + name + "_cuda_archive"],
        hdrs = hdrs,
        deps = deps + ["@cuda//:cudart"],
        linkstatic = True,
        **kwargs
    )
