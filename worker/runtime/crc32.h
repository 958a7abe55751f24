// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320), the checksum of checkpoint files.
//
// Guarantees: crc32("123456789") == 0xCBF43926 (the standard check value); incremental use
//   (crc32_update over pieces) equals one call over the concatenation.
// Assumes: nothing. Caveats: detects corruption, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flotilla::worker {

// Continue a CRC over more bytes; start with crc = 0.
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t size_bytes);

inline std::uint32_t crc32(const void* data, std::size_t size_bytes) {
  return crc32_update(0, data, size_bytes);
}

}  // namespace flotilla::worker
