// A shared library with a large static TLS block, standing in for the CUDA libraries that
// dflash-server links (libcublasLt, libopenblas and libcublas together hold ~175 KB of TLS).
// glibc puts the TLS of every library loaded at start-up into each thread's stack, so a thread
// created with a small explicit stack size (civetweb's ~100 KB workers) fails to start.
#pragma once

#include <cstddef>

namespace dflash::testing {

// The library's thread-local block and its size (calling LargeStaticTlsBytes keeps the library
// linked under --as-needed).
extern thread_local char large_static_tls_block[];
size_t LargeStaticTlsBytes();

}  // namespace dflash::testing
