// ThreadSanitizer suppressions for every test binary of a -DDFLASH_SANITIZE=thread build
// (dflash_add_test adds this file there) and of dflash-server there, which tests/e2e/process_test
// runs.
//
// Debian's gRPC, Abseil, protobuf, OpenSSL, libmicrohttpd and yaml-cpp are not instrumented, so
// TSan cannot see their synchronization (gRPC hands calls, messages and statuses between its
// threads through its own uninstrumented completion queues and locks) and reports every such
// hand-off as a race, hundreds per end-to-end test. Reports with a frame in one of those
// libraries are suppressed, and so are those through absl::Status's reference count: its
// decrement runs in the uninstrumented libabsl_status, so the release/acquire pair that orders a
// Status's last use before its deletion is invisible (a Status copied to another thread and
// destroyed there is reported otherwise).
// gRPC's C++ API is partly header code compiled into our binaries (grpcpp/impl: Call, the
// callback handlers, ServerContextBase), so the same invisible hand-offs show up with only our
// binary's frames: a worker thread finishing a call (ServerUnaryReactor::Finish reads the call's
// context and server) against gRPC's threads recycling that context, or against the server's
// teardown after Server::Wait (seen in CI, 2 of 72 TSan tests, 2026-11-30). Those are suppressed
// by their grpc:: frames. yaml-cpp's nodes hold their memory through std::shared_ptr, whose
// count is decremented inside the uninstrumented libyaml-cpp: its last release, freeing memory,
// was reported against the main thread's pthread_create at server start (e2e_http_test, once in
// three TSan runs of the suite, 2026-12-06).
// What stays checked: races between threads of this project (batch workers, the tokenization
// pool, admission, metrics, test threads) whose stacks do not pass through those libraries or
// gRPC's inline internals; a race between a gRPC thread and one of ours is not reported.
#if defined(__SANITIZE_THREAD__)
extern "C" const char* __tsan_default_suppressions() {
  return "race:libgrpc.so\n"
         "race:libgrpc++.so\n"
         "race:libgrpc++_reflection.so\n"
         "race:libgpr.so\n"
         "race:libabsl_\n"
         "race:libprotobuf.so\n"
         "race:libssl.so\n"
         "race:libcrypto.so\n"
         "race:libmicrohttpd.so\n"
         "race:libyaml-cpp.so\n"
         "race:absl::*Status::Unref\n"
         "race:grpc::internal::\n"
         "race:grpc::ServerContextBase::\n";
}
#endif
