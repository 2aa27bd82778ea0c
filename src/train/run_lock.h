// The run directory's lock: one drift run at a time in a directory. An advisory lock (flock) on
// the directory itself, held for the run's life and released by the kernel when the process ends
// in any way (a killed run leaves no stale lock, and no lock file changes the directory's
// contents). A second `drift train` into the directory, or a `--resume` of a run still going, is
// refused with the holder's pid (found in /proc/locks) instead of interleaving two runs' files.
#pragma once

#include <string>

#include "io/io_error.h"

namespace drift {

// Thrown when another process holds the lock; the message names the directory and the pid.
struct RunDirBusy : io::IoError {
  using io::IoError::IoError;
};

class RunDirLock {
 public:
  // Creates `dir` (and parents) when missing, then takes the lock without waiting. Throws RunDirBusy
  // when it is held, io::IoError when the directory cannot be created or opened.
  explicit RunDirLock(const std::string& dir);
  // Releases the lock. Directories this lock created that are still empty (the run failed before
  // writing anything) are removed again: a refused run leaves nothing behind.
  ~RunDirLock();
  RunDirLock(const RunDirLock&) = delete;
  RunDirLock& operator=(const RunDirLock&) = delete;

 private:
  std::string dir_;
  std::string created_top_;  // the topmost directory this lock created ("" when `dir` existed)
  int fd_ = -1;
};

// The pid holding a flock on the file with this device and inode, per /proc/locks; -1 when unknown.
long flock_holder(unsigned long long dev, unsigned long long ino);

}  // namespace drift
