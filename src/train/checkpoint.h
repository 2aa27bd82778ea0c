// Checkpoint files: the framing around the training loop's state (trainer.cpp writes the payload).
//   "DRIFTCKP" | u64 format version | u64 payload length | payload | u64 FNV-1a-64 of the payload
// written atomically (temporary file + rename), so a checkpoint on disk is always a whole one; a
// truncated, corrupted or foreign file is a CheckpointError naming the file and what is wrong.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace drift {

struct CheckpointError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr uint64_t kCheckpointFormat = 1;

void write_checkpoint(const std::string& path, const std::string& payload);
// Returns the payload after checking magic, format version, length and checksum.
std::string read_checkpoint(const std::string& path);

uint64_t fnv1a64(const std::string& bytes);

}  // namespace drift
