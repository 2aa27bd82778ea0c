#include "train/checkpoint.h"

#include <cstring>

#include "io/npy.h"
#include "io/read_file.h"
#include "train/blob.h"

namespace drift {

namespace {
constexpr char kMagic[8] = {'D', 'R', 'I', 'F', 'T', 'C', 'K', 'P'};
}

uint64_t fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

void write_checkpoint(const std::string& path, const std::string& payload) {
  BlobWriter head, tail;
  head.raw(kMagic, sizeof kMagic);
  head.u64(kCheckpointFormat);
  head.u64(payload.size());
  tail.u64(fnv1a64(payload));
  io::write_file_atomic(path, {head.bytes(), payload, tail.bytes()});
}

std::string read_checkpoint(const std::string& path) {
  std::string bytes;
  try {
    bytes = io::read_regular_file(path, "checkpoint", io::kMaxDataBytes);
  } catch (const io::IoError& e) {
    throw CheckpointError(e.what());
  }
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw CheckpointError(path + ": not a drift checkpoint (bad magic)");
  try {
    BlobReader r(bytes.data() + sizeof kMagic, bytes.size() - sizeof kMagic);
    const uint64_t version = r.u64();
    if (version != kCheckpointFormat)
      throw CheckpointError(path + ": checkpoint format " + std::to_string(version) + ", this drift reads format " +
                            std::to_string(kCheckpointFormat));
    const uint64_t n = r.u64();
    if (n > r.left()) throw CheckpointError(path + ": truncated (payload of " + std::to_string(n) + " bytes, " +
                                            std::to_string(r.left()) + " present)");
    std::string payload(n, '\0');
    r.raw(payload.data(), n);
    const uint64_t sum = r.u64();
    if (sum != fnv1a64(payload)) throw CheckpointError(path + ": corrupted (checksum mismatch)");
    if (r.left()) throw CheckpointError(path + ": trailing bytes after the checkpoint");
    return payload;
  } catch (const BlobError& e) {
    throw CheckpointError(path + ": " + e.what());
  }
}

}  // namespace drift
