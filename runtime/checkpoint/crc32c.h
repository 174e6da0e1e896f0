// CRC-32C (Castagnoli), the checksum of every shard record in a checkpoint:
// computed from its definition, so the format does not depend on a library.
#ifndef LOOM_RUNTIME_CHECKPOINT_CRC32C_H_
#define LOOM_RUNTIME_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace loom::runtime::checkpoint {

// Extends `crc` (0 for an empty message) by `size` bytes at `data`:
// crc32cExtend(crc32cExtend(0, a), b) equals the CRC of a followed by b,
// so large records are checksummed as they stream.
uint32_t crc32cExtend(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(const void* data, size_t size) { return crc32cExtend(0, data, size); }

}  // namespace loom::runtime::checkpoint

#endif  // LOOM_RUNTIME_CHECKPOINT_CRC32C_H_
