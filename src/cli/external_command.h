// Runs another program (sbatch, squeue, scontrol) and captures what it prints.
#pragma once

#include <string>
#include <vector>

namespace drift::cli {

struct CommandOutput {
  bool started = false;  // false: the program could not be run (not installed); `err` says why
  int status = -1;       // exit status (128 + signal when killed)
  std::string out, err;
};

// argv[0] is looked up on PATH. Standard input is /dev/null.
CommandOutput run_command(const std::vector<std::string>& argv);

}  // namespace drift::cli
