#include "train/provenance.h"

#include <omp.h>
#include <unistd.h>

#include <ctime>
#include <filesystem>
#include <fstream>

#include "io/npy.h"

namespace drift {

using ojson = nlohmann::ordered_json;

ojson provenance_record(const std::vector<std::string>& argv, const std::string& backend, bool resumed) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  const std::string commit = drift_build_commit();
  return {{"command_line", argv},
          {"drift_version", DRIFT_VERSION},
          {"git_commit", commit.empty() ? ojson(nullptr) : ojson(commit)},
          {"host", host},
          {"start_time", when},
          {"threads", omp_get_max_threads()},
          {"backend", backend},
          {"resumed", resumed}};
}

void write_provenance(const std::string& run_dir, const ojson& record, bool resumed) {
  const std::string path = (std::filesystem::path(run_dir) / "provenance.json").string();
  ojson doc = {{"invocations", ojson::array()}};
  if (resumed) {
    std::ifstream f(path);
    const ojson old = f ? ojson::parse(f, nullptr, false) : ojson();
    if (old.is_object() && old.contains("invocations") && old["invocations"].is_array()) doc = old;
  }
  doc["invocations"].push_back(record);
  io::write_file_atomic(path, doc.dump(2) + "\n");
}

}  // namespace drift
