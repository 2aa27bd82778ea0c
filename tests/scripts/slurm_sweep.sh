#!/usr/bin/env bash
# drift sweep --launcher slurm against a real Slurm: this script starts a single-node cluster on
# this machine (Debian's slurm-wlm and munge, installed by scripts/setup.sh), everything in its own
# scratch directory (its own munge key and socket, a slurm.conf for localhost with the machine's
# cores and memory, state, spool and logs; slurm commands find it through SLURM_CONF), runs as
# root (as CI does) and stops the daemons on exit. Then:
#   * a 2-policy x 2-seed sweep as one job array, one task at a time, whose every metrics.jsonl
#     and summary.json are byte-identical (timing aside) to the same sweep run locally with -j 2;
#   * one running task sent the preemption signal (scancel --batch --signal=USR1) once its metrics
#     show step >= 60: it checkpoints, exits 75 and requeues itself, continues from its checkpoint,
#     and its result is byte-identical to the uninterrupted local run;
#   * drift sweep --status while runs are queued, running and done, and of a task that failed;
#     drift compare reads both sweeps alike;
#   * the local sweep's live progress lines (whole lines when not on a terminal);
#   * the same submit command again submits nothing (while the runs wait, and once they finished),
#     a different sweep into the directory is refused while they wait; with one run removed, the
#     command submits only that run.
# If Slurm cannot start, the test fails with the daemons' logs; it never skips.
# Usage: slurm_sweep.sh <drift-binary> <source-dir>
source "$(dirname "$0")/common.bash" "$@"
export OMP_NUM_THREADS=1

for p in munged mungekey slurmctld slurmd sbatch squeue scontrol scancel; do
  command -v "$p" >/dev/null || fail "$p not found: scripts/setup.sh installs slurm-wlm and munge"
done
[ "$(id -u)" = 0 ] || fail "starting slurmctld and slurmd needs root (CI runs as root)"

# --- a single-node Slurm in the scratch directory ---
S="$work/slurm"
mkdir -p "$S/state" "$S/spool"
chmod 755 "$work" "$S"  # munged and slurmd want to reach the socket and spool through it
export SLURM_CONF="$S/slurm.conf"

show_logs() {
  for f in "$S"/munged.log "$S"/slurmctld.log "$S"/slurmd.log; do
    [ -f "$f" ] && { echo "==== $f (last 40 lines)"; tail -n 40 "$f"; }
  done
  for f in sl/slurm/task-*.log; do
    [ -f "$f" ] && { echo "==== $f"; cat "$f"; }
  done
  true
}
stop_slurm() {
  [ -n "${scancel_pid:-}" ] && kill "$scancel_pid" 2>/dev/null
  # Jobs first (slurmd's job step daemons and the runs), then the daemons, each by its pid file.
  [ -f "$S/slurmctld.pid" ] && timeout 10 scancel --quiet --user="$(id -u)" 2>/dev/null
  for f in "$S/slurmd.pid" "$S/slurmctld.pid" "$S/munged.pid"; do
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  true
}
# On any exit (a signal included): the logs when failing, then the daemons stopped and the scratch
# directory removed, whatever fails on the way; the script's own exit status kept.
cleanup() {
  local rc=$?
  set +e
  trap - EXIT
  [ $rc -ne 0 ] && (cd "$work" && show_logs) >&2
  cd /
  stop_slurm
  rm -rf "$work"
  exit $rc
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

mungekey --create --keyfile="$S/munge.key" --bits=1024
chmod 400 "$S/munge.key"
munged --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
  --log-file="$S/munged.log" --seed-file="$S/munge.seed" --force || fail "munged did not start"

# Free ports for the controller and the node daemon (asked of the kernel, not assumed).
read -r ctld_port node_port < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
host=$(hostname -s)
node_line=$(slurmd -C | head -n 1)  # NodeName=... CPUs=... RealMemory=...: what slurmd will find
cpus=$(sed -n 's/.* CPUs=\([0-9]*\).*/\1/p' <<<"$node_line")
mem=$(sed -n 's/.* RealMemory=\([0-9]*\).*/\1/p' <<<"$node_line")
[ -n "$cpus" ] && [ -n "$mem" ] || fail "slurmd -C printed no CPUs/RealMemory: $node_line"
: > "$S/plugstack.conf"
cat > "$SLURM_CONF" <<EOF
ClusterName=drifttest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$node_port
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
PlugStackConfig=$S/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld || fail "slurmctld did not start"
slurmd -N "$host" || fail "slurmd did not start"
state=""
for _ in $(seq 150); do
  state=$(sinfo --noheader --format=%T 2>/dev/null || true)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || fail "the Slurm node did not become idle (sinfo: '$state')"

# --- the sweep: a small MLP, slow enough to be seen running (1 thread, 300 steps of a few ms each,
# every step logged: a few seconds a run) ---
cat > tiny.json <<JSON
{ "seed": 1,
  "model": {"kind": "mlp", "context": 16, "embed": 32, "hidden": 512},
  "data": {"path": "$src/data/austen/persuasion.txt"},
  "train": {"steps": 300, "batch": 32, "lr": 0.01, "warmup": 0, "eval_every": 100, "eval_batches": 2,
            "log_every": 1, "checkpoint_every": 50},
  "divergence": {"after_step": 0} }
JSON
echo '"fp32"' > fp32.json
echo '"bf16"' > bf16.json
sweep=(--config tiny.json --seeds 1-2 --policies fp32.json bf16.json)
steps=300

t0=$SECONDS
# A progress line every 0.05 s (the sweep polls every 20 ms): a run of these 300 steps takes about
# half a second, and with lines 0.5 s apart a fast machine finished a pair of runs before the first
# line, which then never showed the states asserted below.
"$drift" sweep "${sweep[@]}" -j 2 --out local --progress-every 0.05 > local.txt || fail "local sweep: $(cat local.txt)"
echo "local sweep (-j 2): $((SECONDS - t0)) s"
# Its live progress, written to a file: whole lines, two runs at a time with their steps and losses.
grep -qE "^sweep [0-9hms.]+: 0/4 done, 2 running, 2 left \| fp32/seed1 step [0-9]+ loss [0-9.]+ \| fp32/seed2 step [0-9]+ loss [0-9.]+ \| ETA [0-9hms.]+$" local.txt \
  && grep -qE "^sweep [0-9hms.]+: 2/4 done, 2 running, 0 left \| bf16/seed1 step " local.txt || fail "local sweep progress: $(cat local.txt)"

t0=$SECONDS
"$drift" sweep "${sweep[@]}" --launcher slurm --array-throttle 1 --out sl > submit.txt || fail "submit: $(cat submit.txt)"
grep -q "submitted job array .*: 4 of 4 runs (--array=0-3%1)" submit.txt || fail "submit output: $(cat submit.txt)"
job=$(python3 -c 'import json; print(json.load(open("sl/sweep.json"))["slurm"]["jobs"][0]["job_id"])')
status() { "$drift" sweep --status sl > status.txt || fail "--status exited $?: $(cat status.txt)"; }
row() { grep -E "^$1 +" status.txt || true; }  # the --status line of run <index>

# The runs are tiny: on a quiet machine run 0 could end before the checks below see it running, so
# it is held still (SIGSTOP) from the moment its task process appears, let forward a few
# milliseconds at a time up to step 60, and held there until the preemption signal is on its way,
# then let go (SIGCONT): the signal then lands mid-run whatever the machine's speed. (On a loaded
# machine the poll itself is slow enough for the whole 300 steps to pass between polls.)
task_pid=""
for _ in $(seq 6000); do
  task_pid=$(pgrep -f -- "sweep --run-task" | head -n 1 || true)
  [ -n "$task_pid" ] && break
  sleep 0.01
done
[ -n "$task_pid" ] && kill -STOP "$task_pid"

# Queued: one task at a time, so runs 1-3 wait (JobArrayTaskLimit) while run 0 runs.
status
for i in 1 2 3; do
  row $i | grep -qE "^$i +queued +(fp32|bf16)/seed[12] +job ${job}_$i, " || fail "run $i not queued: $(cat status.txt)"
done

# The same command while they wait: nothing submitted twice. Another sweep into the same directory
# (its runs at other indices) is refused while they wait (exit 2).
"$drift" sweep "${sweep[@]}" --launcher slurm --out sl > resubmit.txt || fail "resubmit: $(cat resubmit.txt)"
grep -q "nothing to submit: 4 runs, 0 finished, 4 queued or running" resubmit.txt || fail "resubmit while queued: $(cat resubmit.txt)"
rc=0; "$drift" sweep --config tiny.json --seeds 3 --policies fp32.json --launcher slurm --out sl 2> err.txt || rc=$?
[ "$rc" = 2 ] && grep -q "sl: 4 tasks of an earlier submission of a different sweep are still queued or running" err.txt \
  || fail "a different sweep over queued tasks: exit $rc: $(cat err.txt)"

# Running: once run 0 has logged step 60 (0-based 59), --status shows it with its step and loss...
metric_step() { tail -n 1 "$1/metrics.jsonl" 2>/dev/null | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["step"])' 2>/dev/null || echo -1; }
if [ -n "$task_pid" ]; then
  for _ in $(seq 6000); do
    [ "$(metric_step sl/fp32/seed1)" -ge 59 ] && break
    kill -CONT "$task_pid"; sleep 0.003; kill -STOP "$task_pid"
  done
fi
[ "$(metric_step sl/fp32/seed1)" -ge 59 ] || fail "run 0 did not reach step 60"
[ -n "$task_pid" ] || fail "run 0's task process not found (pgrep 'sweep --run-task')"
status
row 0 | grep -qE "^0 +running +fp32/seed1 +step [0-9]+/$steps, loss [0-9.]+ \(job ${job}_0, R\)" \
  || fail "run 0 not shown running: $(cat status.txt)"
# ... and the preemption signal: it checkpoints, exits 75, requeues itself.
# (Slurm 22.05's scancel delivers a signal to an array task whose siblings wait in the queue, but
# then reports "Job can not be altered now, try again later" and retries for a minute and a half:
# it runs in the background, and the task's log shows whether the signal arrived.)
scancel --batch --signal=USR1 "${job}_0" 2> scancel.err & scancel_pid=$!
# Let the held run go once SIGUSR1 (bit 9 of /proc/PID/status's pending masks) waits on it.
usr1_pending() {
  python3 -c 'import sys
m = 0
for line in open("/proc/%s/status" % sys.argv[1]):
    if line.startswith(("SigPnd:", "ShdPnd:")): m |= int(line.split()[1], 16)
sys.exit(0 if m & (1 << 9) else 1)' "$task_pid" 2>/dev/null
}
for _ in $(seq 600); do usr1_pending && break; sleep 0.05; done
# (A task that ended while held would make kill fail with no word under set -e: once seen in CI,
# with munged logging rejected credentials. Say what the task, the queue and scancel showed.)
kill -CONT "$task_pid" 2>/dev/null || fail "run 0's task (pid $task_pid) ended while held for the preemption signal;" \
  "squeue: $(squeue --noheader --array --jobs="$job" 2>&1 | tr '\n' ';'); scancel: $(tr '\n' ';' < scancel.err)"
for _ in $(seq 300); do
  grep -q "requeueing Slurm job" sl/slurm/task-0.log 2>/dev/null && break
  sleep 0.1
done
kill "$scancel_pid" 2>/dev/null; wait "$scancel_pid" 2>/dev/null || true; scancel_pid=""
grep -q "drift: preempted (SIGUSR1) after step" sl/slurm/task-0.log || fail "task 0 was not preempted"
at=$(sed -n 's/.*preempted (SIGUSR1) after step \([0-9]*\).*/\1/p' sl/slurm/task-0.log)
[ "$at" -ge 60 ] && [ "$at" -lt "$steps" ] || fail "the signal did not land mid-run (after step $at of $steps)"
[ -f sl/fp32/seed1/summary.json ] && fail "a preempted run wrote summary.json"
# Requeued: queued again, to continue after its checkpoint. Slurm holds a requeued job back for a
# while (BeginTime); the test lets it start now rather than wait for that.
state=""
for _ in $(seq 300); do
  state=$(squeue --noheader --array --jobs="${job}_0" --format=%t 2>/dev/null || true)
  [ "$state" = PD ] && break
  sleep 0.1
done
[ "$state" = PD ] || fail "task 0 was not requeued (squeue: '$state')"
status
row 0 | grep -qE "^0 +queued +fp32/seed1 +job ${job}_0, .*; continues after step [0-9]+/$steps" \
  || fail "requeued run 0 not shown queued: $(cat status.txt)"
scontrol update JobId="${job}_0" StartTime=now || fail "scontrol update StartTime"

# Done: wait for the queue to empty.
for _ in $(seq 1200); do
  [ -z "$(squeue --noheader --jobs="$job" 2>/dev/null)" ] && break
  sleep 0.2
done
[ -z "$(squeue --noheader --jobs="$job" 2>/dev/null)" ] || fail "the job array did not finish: $(squeue)"
echo "slurm sweep (one task at a time, with a preemption): $((SECONDS - t0)) s"
status
tail -n 1 status.txt | grep -qx "4 runs: 4 finished" || fail "--status when done: $(cat status.txt)"
grep -q "continuing from its checkpoint" sl/slurm/task-0.log || fail "task 0 did not continue from its checkpoint"
[ "$(grep -c "drift sweep: run 0 of 4" sl/slurm/task-0.log)" = 2 ] || fail "task 0 should have started twice: $(cat sl/slurm/task-0.log)"

# Every run byte-identical (timing aside) to the local sweep, the preempted one included.
same_runs() {
  for d in fp32/seed1 fp32/seed2 bf16/seed1 bf16/seed2; do
    cmp <(no_timing "local/$d/metrics.jsonl") <(no_timing "sl/$d/metrics.jsonl") || fail "$d: metrics.jsonl differs from the local sweep"
    same_summary "local/$d/summary.json" "sl/$d/summary.json" || fail "$d: summary.json differs from the local sweep"
  done
}
same_runs
# The same sweep.json plan: runs, labels, and args that reproduce each run from scratch.
python3 - <<'PY' || fail "sweep.json of the Slurm sweep differs from the local one"
import json
a, b = json.load(open("local/sweep.json")), json.load(open("sl/sweep.json"))
assert a["launcher"] == "local" and b["launcher"] == "slurm"
assert [r["status"] for r in b["runs"]] == ["submitted"] * 4, b["runs"]
assert [j["tasks"] for j in b["slurm"]["jobs"]] == [[0, 1, 2, 3]] and b["slurm"]["script"] == "slurm/sweep.sbatch", b["slurm"]
for k in ("config", "seeds", "sets", "policies"):
    assert a[k] == b[k], k
assert len(a["runs"]) == len(b["runs"]) == 4
for x, y in zip(a["runs"], b["runs"]):
    for k in ("dir", "seed", "policy", "overrides", "varying"):
        assert x[k] == y[k], (k, x, y)
    assert [s.replace("local/", "sl/", 1) if s.startswith("local/") else s for s in x["args"]] == y["args"], (x, y)
    assert "--resume" not in y["args"]
PY
# drift compare reads the Slurm sweep's directory as the local one.
cmp <("$drift" compare local --format csv) <("$drift" compare sl --format csv) || fail "drift compare of the two sweeps differs"
# The recorded args alone reproduce a run from scratch (here the preempted one).
python3 -c 'import json; print("\0".join(json.load(open("sl/sweep.json"))["runs"][0]["args"]), end="")' \
  | sed 's#sl/fp32/seed1#again#' | xargs -0 "$drift" || fail "sweep.json args did not run"
cmp <(no_timing local/fp32/seed1/metrics.jsonl) <(no_timing again/metrics.jsonl) || fail "sweep.json args reproduce another run"

# The same command again: everything finished, nothing submitted.
"$drift" sweep "${sweep[@]}" --launcher slurm --out sl > resubmit.txt || fail "resubmit: $(cat resubmit.txt)"
grep -q "nothing to submit: 4 runs, 4 finished, 0 queued or running" resubmit.txt || fail "resubmit: $(cat resubmit.txt)"
# One run gone: only it is submitted; its task runs it again, to the same bytes.
rm -rf sl/bf16/seed2
"$drift" sweep "${sweep[@]}" --launcher slurm --out sl > resubmit.txt || fail "resubmit: $(cat resubmit.txt)"
grep -q ": 1 of 4 runs (--array=3), 3 finished" resubmit.txt || fail "resubmit of one run: $(cat resubmit.txt)"
job2=$(python3 -c 'import json; j = json.load(open("sl/sweep.json"))["slurm"]["jobs"]; assert len(j) == 2; print(j[1]["job_id"])')
for _ in $(seq 600); do
  [ -z "$(squeue --noheader --jobs="$job2" 2>/dev/null)" ] && break
  sleep 0.2
done
status
tail -n 1 status.txt | grep -qx "4 runs: 4 finished" || fail "--status after the resubmission: $(cat status.txt)"
same_runs
# A task that fails (its data file is missing: found only when the run starts) is failed in
# --status, with the tail of its log.
"$drift" sweep --config tiny.json --seeds 1 --set data.path=nosuch.txt --launcher slurm --out slf > submit.txt \
  || fail "submit: $(cat submit.txt)"
job3=$(python3 -c 'import json; print(json.load(open("slf/sweep.json"))["slurm"]["jobs"][0]["job_id"])')
for _ in $(seq 300); do
  [ -z "$(squeue --noheader --jobs="$job3" 2>/dev/null)" ] && break
  sleep 0.2
done
"$drift" sweep --status slf > status.txt || fail "--status exited $?"
grep -qx "0      failed       tiny/seed1; log tail:" status.txt && grep -q "^       | drift: error: data.path: .*nosuch.txt" status.txt \
  && tail -n 1 status.txt | grep -qx "1 run: 1 failed" || fail "--status of a failed task: $(cat status.txt)"

# --run-task of a finished run does nothing.
"$drift" sweep --run-task sl 1 2> task.err || fail "--run-task of a finished run exited $?"
grep -q "run 1 (sl/fp32/seed2) finished already; nothing to do" task.err || fail "--run-task: $(cat task.err)"
echo "slurm_sweep: all checks passed in $SECONDS s"
