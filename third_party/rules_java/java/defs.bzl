"""Offline stand-in for @rules_java: re-exports Bazel 4.2.3's native Java rules.

The project has no Java code; Bazel still loads these names while it sets up
its default toolchains, so they must resolve without a download.
"""

java_binary = native.java_binary
java_import = native.java_import
java_library = native.java_library
java_plugin = native.java_plugin
java_proto_library = native.java_proto_library
java_runtime = native.java_runtime
java_test = native.java_test
java_toolchain = native.java_toolchain
