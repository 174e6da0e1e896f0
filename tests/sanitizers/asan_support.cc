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
      "leak:gloo::transport::tcp::CreateDeviceAttr\n"
      // cuBLASLt 13 (/usr/local/cuda): on a machine whose CUDA driver is
      // unusable, cublasLtCreate() keeps a 192-byte allocation that no
      // cublasLtDestroy() reaches. cuda_kernels_no_gpu_test creates a handle
      // there on purpose, to check the error it reports.
      "leak:cublasLtCreate\n";
}
