#include "tests/server/metrics/large_static_tls.h"

namespace dflash::testing {

// 256 KiB, more than the CUDA libraries' ~175 KB, so that the test does not depend on their sizes.
// External linkage, so that the compiler cannot drop the block.
thread_local char large_static_tls_block[256 * 1024];

size_t LargeStaticTlsBytes() { return sizeof(large_static_tls_block); }

}  // namespace dflash::testing
