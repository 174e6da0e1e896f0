// LeakSanitizer suppressions for `--config=asan`, compiled into every binary
// (through --custom_malloc) because LSan reads a suppression file only from
// a path, which no Bazel option can give every test. Only leaks inside
// uninstrumented system libraries belong here, each with its reason; a leak
// in loom's code is a bug to fix. Outside ASan nothing links this (and LSan
// is what calls the function).
extern "C" const char* __lsan_default_suppressions() {
  return
      // Debian's Gloo (git 2022-05-18): CreateDeviceAttr() throws when the
      // interface it is given has no usable address without freeing the
      // getifaddrs() list (gloo/transport/tcp/device.cc). The gloo backend
      // test covers that error on purpose.
      "leak:gloo::transport::tcp::CreateDeviceAttr\n";
}
