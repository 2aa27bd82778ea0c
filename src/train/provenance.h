// How a run was made: provenance.json in the run directory, beside config.json (which stays a
// valid config: provenance is not configuration, and two runs of the same config and seed must keep
// byte-identical config.json and metrics.jsonl). One record per invocation that wrote the run: the
// first start, then each --resume appends one.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace drift {

// The git commit drift was built from ("<sha>", "<sha>-dirty", or "" when unknown); generated at
// build time by cmake/build_info.cmake.
const char* drift_build_commit();

// One invocation: command_line (the arguments as given), drift_version, git_commit (null when
// unknown), host, start_time (UTC, ISO 8601), threads (OpenMP's), backend, resumed.
nlohmann::ordered_json provenance_record(const std::vector<std::string>& argv, const std::string& backend, bool resumed);

// Writes run_dir/provenance.json: {"invocations": [...]} with `record` appended to those already
// there when `resumed` (a new run starts the list afresh). Atomic, like every run file.
void write_provenance(const std::string& run_dir, const nlohmann::ordered_json& record, bool resumed);

}  // namespace drift
