// libFuzzer target: the config reader with --set. The input is text: lines starting with "--set "
// are assignments (applied in order), the rest is the config file. Every input must end in a
// parsed config or a ConfigError / io::IoError; any other exception, a crash or a sanitizer finding
// is a bug. A config that parses must survive its own resolved form (config.json reads back).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "io/json_read.h"
#include "train/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string config;
  std::vector<std::string> sets;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    const std::string line = text.substr(start, nl - start);
    if (line.rfind("--set ", 0) == 0) sets.push_back(line.substr(6));
    else config += line + "\n";
    start = nl + 1;
  }
  try {
    nlohmann::json j = drift::io::parse_json(config, "fuzz config");
    for (const auto& s : sets) drift::apply_set(j, s);
    const drift::RunConfig c = drift::parse_run_config(j);
    nlohmann::json back = nlohmann::json::parse(drift::resolved_config_json(c).dump());
    back.erase("version");
    const drift::RunConfig again = drift::parse_run_config(back);
    if (drift::resolved_config_json(again) != drift::resolved_config_json(c)) std::abort();  // not a fixed point
  } catch (const drift::ConfigError&) {
  } catch (const drift::io::IoError&) {
  }
  return 0;
}
