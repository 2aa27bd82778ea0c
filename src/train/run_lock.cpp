#include "train/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/out_dir.h"

namespace drift {

namespace fs = std::filesystem;

long flock_holder(unsigned long long dev, unsigned long long ino) {
  // Lines look like "3: FLOCK  ADVISORY  WRITE 12345 08:01:1234567 0 EOF" (device major:minor in hex).
  std::ifstream f("/proc/locks");
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string id, kind, mode, rw, pid, where;
    if (!(in >> id >> kind)) continue;
    if (kind == "->") {  // a waiter: "3: -> FLOCK ..."
      continue;
    }
    if (kind != "FLOCK" || !(in >> mode >> rw >> pid >> where)) continue;
    unsigned maj = 0, min = 0;
    unsigned long long inode = 0;
    if (std::sscanf(where.c_str(), "%x:%x:%llu", &maj, &min, &inode) != 3) continue;
    if (inode == ino && makedev(maj, min) == dev) return std::strtol(pid.c_str(), nullptr, 10);
  }
  return -1;
}

RunDirLock::RunDirLock(const std::string& dir) : dir_(dir) {
  std::error_code ec;
  for (fs::path p = fs::path(dir).lexically_normal(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) {
    created_top_ = p.string();
    if (p == p.parent_path()) break;
  }
  io::create_output_dir(dir, "run directory");
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw io::IoError(dir + ": cannot open the run directory (" + std::string(std::strerror(errno)) + ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  struct stat st {};
  const long holder = ::fstat(fd_, &st) == 0 ? flock_holder(st.st_dev, st.st_ino) : -1;
  ::close(fd_);
  fd_ = -1;
  if (err != EWOULDBLOCK) throw io::IoError(dir + ": cannot lock the run directory (" + std::string(std::strerror(err)) + ")");
  throw RunDirBusy(dir + ": a drift run is in progress in this directory (pid " +
                   (holder > 0 ? std::to_string(holder) : std::string("unknown")) +
                   "); wait for it to finish, or choose another directory");
}

RunDirLock::~RunDirLock() {
  if (fd_ < 0) return;
  if (!created_top_.empty()) {
    // Empty: the run wrote nothing; leave none of the directories it created (rmdir keeps non-empty ones).
    const fs::path top = fs::path(created_top_);
    for (fs::path p = fs::path(dir_).lexically_normal(); !p.empty(); p = p.parent_path())
      if (::rmdir(p.c_str()) != 0 || p == top || p == p.parent_path()) break;
  }
  ::close(fd_);
}

}  // namespace drift
