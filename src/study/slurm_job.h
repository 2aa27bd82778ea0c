// A sweep as one Slurm job array: the batch script, the array's index list, and what sbatch and
// squeue print, as text. Pure logic; running sbatch/squeue is the command line's job
// (src/cli/sweep_slurm.cpp). docs/workflow.md describes the whole flow.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace drift {

// The text quoted for a POSIX shell ('...' with each ' written '\''); plain words stay as they are.
std::string shell_quote(const std::string& text);

// sbatch's --array value for these task indices (ascending): runs of consecutive ones as ranges,
// "0-3,5,7-8"; "%N" appended when `throttle` > 0 (at most N tasks at a time). Empty input: "".
std::string array_spec(const std::vector<size_t>& indices, size_t throttle);

struct SlurmScript {
  std::string sweep_dir;     // the sweep directory as drift sweep --run-task is to be given it
  std::string log_dir;       // absolute: where each task's log goes (task-<index>.log, appended to)
  std::string work_dir;      // absolute: the directory relative paths in sweep.json start from
  std::string drift;         // absolute path of the drift binary
  unsigned preempt_notice_s = 120;  // SIGUSR1 this long before the time limit
};

// The batch script: #SBATCH lines (job name, log, append on requeue, --requeue, --signal=B:USR1@N),
// then `cd work_dir` and `exec drift sweep --run-task sweep_dir $SLURM_ARRAY_TASK_ID`. The options
// given to sbatch on its command line (--array, the user's --sbatch-arg) take precedence over these.
std::string sbatch_script(const SlurmScript& s);

// The job id in `sbatch --parsable` output ("123" or "123;cluster"); std::runtime_error otherwise.
std::string parse_sbatch_job_id(const std::string& output);

// One line of `squeue --array --noheader --format="%F %K %t %r"`: an array task still in the queue.
struct QueuedTask {
  std::string job_id;   // the array's job id (%F)
  size_t index = 0;     // the array index (%K)
  std::string state;    // compact state: PD pending, R running, CG completing, S suspended, ...
  std::string reason;   // why pending (BeginTime, JobArrayTaskLimit, Resources, ...), "None" when running
};
constexpr const char* kSqueueFormat = "%F %K %t %r";
// Lines that are not array tasks (a %K of "N/A" or a range still unsplit) are left out.
std::vector<QueuedTask> parse_squeue(const std::string& text);

}  // namespace drift
