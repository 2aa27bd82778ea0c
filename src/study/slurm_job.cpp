#include "study/slurm_job.h"

#include <sstream>
#include <stdexcept>

namespace drift {

std::string shell_quote(const std::string& text) {
  const bool plain = !text.empty() && text.find_first_not_of(
                                          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
                                          "_-./=,+:@%") == std::string::npos;
  if (plain) return text;
  std::string q = "'";
  for (const char c : text) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string array_spec(const std::vector<size_t>& indices, size_t throttle) {
  std::string spec;
  for (size_t i = 0; i < indices.size();) {
    size_t j = i;
    while (j + 1 < indices.size() && indices[j + 1] == indices[j] + 1) ++j;
    if (!spec.empty()) spec += ",";
    spec += std::to_string(indices[i]);
    if (j > i) spec += "-" + std::to_string(indices[j]);
    i = j + 1;
  }
  if (!spec.empty() && throttle > 0) spec += "%" + std::to_string(throttle);
  return spec;
}

std::string sbatch_script(const SlurmScript& s) {
  std::ostringstream o;
  o << "#!/bin/bash\n"
    << "# One drift sweep run per array task: the index is the run's place in " << s.sweep_dir << "/sweep.json.\n"
    << "# --run-task starts the run, continues it from its checkpoint, or does nothing if it finished;\n"
    << "# on SIGUSR1 (the --signal notice before the time limit, or scancel --batch --signal=USR1) the\n"
    << "# run writes its checkpoint and requeues itself. Written by drift sweep --launcher slurm.\n"
    << "#SBATCH --job-name=drift-sweep\n"
    << "#SBATCH --output=" << s.log_dir << "/task-%a.log\n"
    << "#SBATCH --open-mode=append\n"
    << "#SBATCH --requeue\n"
    << "#SBATCH --signal=B:USR1@" << s.preempt_notice_s << "\n"
    << "cd " << shell_quote(s.work_dir) << " || exit 1\n"
    << "export OMP_NUM_THREADS=\"${OMP_NUM_THREADS:-${SLURM_CPUS_PER_TASK:-1}}\"\n"
    << "exec " << shell_quote(s.drift) << " sweep --run-task " << shell_quote(s.sweep_dir)
    << " \"$SLURM_ARRAY_TASK_ID\"\n";
  return o.str();
}

std::string parse_sbatch_job_id(const std::string& output) {
  std::string id = output.substr(0, output.find_first_of(";\n"));
  while (!id.empty() && (id.back() == ' ' || id.back() == '\r')) id.pop_back();
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw std::runtime_error("sbatch printed no job id: '" + output + "'");
  return id;
}

std::vector<QueuedTask> parse_squeue(const std::string& text) {
  std::vector<QueuedTask> tasks;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream f(line);
    QueuedTask t;
    std::string index;
    if (!(f >> t.job_id >> index >> t.state)) continue;
    std::getline(f >> std::ws, t.reason);
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos) continue;
    t.index = std::stoull(index);
    tasks.push_back(std::move(t));
  }
  return tasks;
}

}  // namespace drift
