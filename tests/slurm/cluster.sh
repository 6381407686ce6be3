#!/usr/bin/env bash
# A real one-node Slurm on this machine, for tests/test_slurm_cluster.py:
#   tests/slurm/cluster.sh start   install slurm-wlm and munge if missing, start munged, slurmctld, slurmd
#   tests/slurm/cluster.sh stop    stop exactly the daemons `start` started (by pid) and remove the state
#   tests/slurm/cluster.sh env     print the variables a client needs (SLURM_CONF)
# Everything lives in $RNNMT_SLURM_DIR (default /tmp/rnnmt-slurm): configuration, munge key and socket, pid files,
# logs, spool and two device files that stand in for GPUs. Clients find the cluster through
# SLURM_CONF=$RNNMT_SLURM_DIR/slurm.conf, and /etc/slurm/slurm.conf is a link to it (see DEFAULT_CONF); a machine
# with a slurm.conf of its own is left alone. Needs root (the daemons run as root, apt-get installs).
# `start` changes this machine only where RNNMT_TEST_SYSTEM_CHANGES=1 allows it (CI's .ci/run; tests/conftest.py).
# Exit status 3 with one line on stderr means this machine cannot run the cluster (the tests skip with that line).
set -euo pipefail

STATE=${RNNMT_SLURM_DIR:-/tmp/rnnmt-slurm}
CONF=$STATE/slurm.conf
# Inside a job the executor plugin runs `srun` with every SLURM_* variable removed, SLURM_CONF included, so srun
# reads the compiled-in default: that path becomes a link to $CONF while the cluster runs.
DEFAULT_CONF=/etc/slurm/slurm.conf
export SLURM_CONF=$CONF  # for the daemons and the client commands below
GPUS=2  # two stand-in GPUs: two GPU jobs can run at once, as on a real GPU node
HOST=$(hostname -s)

cannot() {
    echo "cannot run a test Slurm cluster: $*" >&2
    if [ "${STARTING:-}" = 1 ]; then  # undo what this start had done; the logs stay
        stop_daemons >/dev/null 2>&1
        unlink_default_conf
    fi
    exit 3
}

install_packages() {
    local missing=()
    command -v slurmctld >/dev/null || missing+=(slurm-wlm)
    command -v munged >/dev/null || missing+=(munge)
    [ ${#missing[@]} -eq 0 ] && return
    command -v apt-get >/dev/null || cannot "${missing[*]} missing and there is no apt-get to install them"
    echo "installing ${missing[*]} with apt-get" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
        >"${TMPDIR:-/tmp}/rnnmt-slurm-apt.log" 2>&1 || cannot "apt-get install ${missing[*]} failed (${TMPDIR:-/tmp}/rnnmt-slurm-apt.log)"
}

# Wait up to $1 seconds for the command after it to succeed.
wait_for() {
    local seconds=$1
    shift
    for _ in $(seq $((seconds * 2))); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.5
    done
    return 1
}

write_config() {
    # The node as slurmd sees it (CPUs, sockets, RealMemory), with the stand-in GPUs.
    local node
    node=$(slurmd -C | head -1)
    mkdir -p "$STATE/dev"
    for i in $(seq 0 $((GPUS - 1))); do
        # slurmd 22.05 stats a GRES File= and wants a character device (its major/minor number); 195 is
        # NVIDIA's major number. No driver is behind it and nothing opens it: CPU-only jobs see CUDA_VISIBLE_DEVICES.
        [ -c "$STATE/dev/gpu$i" ] || mknod "$STATE/dev/gpu$i" c 195 "$i" || cannot "mknod (needed for the stand-in GPU device files) is not allowed"
    done
    cat >"$STATE/gres.conf" <<EOF
AutoDetect=off
NodeName=$HOST Name=gpu File=$STATE/dev/gpu[0-$((GPUS - 1))]
EOF
    cat >"$CONF" <<EOF
# Written by tests/slurm/cluster.sh: one node, a cpu and a gpu partition on it, no accounting database.
ClusterName=rnnmt-test
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$STATE/munge/munge.socket.2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldPort=${RNNMT_SLURMCTLD_PORT:-6817}
SlurmdPort=${RNNMT_SLURMD_PORT:-6818}
# No cgroups: tracking by process tree, no CPU binding (containers rarely allow either).
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
# The plugin's squeue status check only sees finished jobs for MinJobAge seconds, and it falls back to sacct
# (which needs slurmdbd) when MinJobAge < 3 x its first status interval; the tests read finished jobs with
# scontrol. An hour covers a whole test run.
MinJobAge=3600
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
GresTypes=gpu
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=10
InactiveLimit=0
MpiDefault=none
KillWait=30
MailProg=/bin/true
$node Gres=gpu:$GPUS State=UNKNOWN
PartitionName=cpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$HOST MaxTime=INFINITE State=UP
EOF
}

# Whether the slurmctld whose state directory is $1 is running.
ctld_running() {
    [ -f "$1/slurmctld.pid" ] && kill -0 "$(cat "$1/slurmctld.pid")" 2>/dev/null
}

# Whether the slurm.conf $1 (a link's target) is gone, or was written by this script for a test cluster whose
# slurmctld is gone: then nothing uses the link to it. A site's slurm.conf is never taken for one.
stale_test_conf() {
    [ ! -e "$1" ] && return 0
    grep -q '^ClusterName=rnnmt-test$' "$1" && ! ctld_running "$(dirname "$1")"
}

start() {
    [ "${RNNMT_TEST_SYSTEM_CHANGES:-}" = 1 ] \
        || cannot "it needs root, slurm-wlm and munge (installed with apt-get where missing), and starts munged, slurmctld and slurmd on this machine: set RNNMT_TEST_SYSTEM_CHANGES=1 to allow it"
    [ "$(id -u)" -eq 0 ] || cannot "it needs root (slurmd runs jobs as their user, munged and apt-get need root)"
    if ctld_running "$STATE"; then
        cannot "one is already running in $STATE (tests/slurm/cluster.sh stop)"
    fi
    install_packages
    if [ -L "$DEFAULT_CONF" ] && stale_test_conf "$(readlink "$DEFAULT_CONF")"; then
        rm "$DEFAULT_CONF"  # left by a test cluster that was killed before its stop
    fi
    if [ -e "$DEFAULT_CONF" ] && [ "$(readlink "$DEFAULT_CONF")" != "$CONF" ]; then
        cannot "$DEFAULT_CONF exists ($(readlink -f "$DEFAULT_CONF"): another Slurm on this machine), and jobs of the test cluster need that path"
    fi
    STARTING=1
    rm -rf "$STATE"
    mkdir -p "$STATE/munge" "$STATE/ctld" "$STATE/spool" "$(dirname "$DEFAULT_CONF")"
    chmod 700 "$STATE" "$STATE/munge"
    write_config
    ln -sfn "$CONF" "$DEFAULT_CONF"

    # munged refuses keys others can read; a fresh key per cluster is enough on one host.
    dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$STATE/munge/munge.key"
    munged --force --key-file="$STATE/munge/munge.key" --socket="$STATE/munge/munge.socket.2" \
        --pid-file="$STATE/munge/munged.pid" --log-file="$STATE/munge/munged.log" --seed-file="$STATE/munge/munged.seed" \
        || cannot "munged did not start ($STATE/munge/munged.log)"
    wait_for 10 test -S "$STATE/munge/munge.socket.2" || cannot "munged did not open its socket ($STATE/munge/munged.log)"

    # -i: ignore state from an earlier run; both daemonise and write their pid files.
    slurmctld -i -f "$CONF" || cannot "slurmctld did not start ($STATE/slurmctld.log)"
    wait_for 20 scontrol ping || cannot "slurmctld does not answer ($STATE/slurmctld.log)"
    slurmd -f "$CONF" || cannot "slurmd did not start ($STATE/slurmd.log)"
    if ! wait_for 60 node_idle; then
        cannot "node $HOST is not idle after 60 s: $(sinfo -h -N -o '%N %T %E' 2>&1) (logs in $STATE)"
    fi
    echo "Slurm $(sinfo --version | cut -d' ' -f2) running: SLURM_CONF=$CONF" >&2
}

no_jobs_left() {
    [ -z "$(squeue -h -t PENDING,RUNNING,COMPLETING,SUSPENDED -o %i)" ]
}

node_idle() {
    [ "$(sinfo -h -n "$HOST" -p cpu -o %T)" = idle ]
}

stop_daemons() {
    local name pidfile pid
    # Jobs first: their slurmstepd processes outlive slurmd.
    if [ -f "$STATE/slurmctld.pid" ] && scontrol ping >/dev/null 2>&1; then
        squeue -h -t PENDING,RUNNING,SUSPENDED -o %i | xargs -r scancel --full || true
        wait_for 40 no_jobs_left || echo "jobs still running after scancel: $(squeue -h 2>&1)" >&2
    fi
    # Then the daemons in reverse order of starting, each by the pid it wrote, if that pid is still that daemon.
    for name in slurmd slurmctld munge/munged; do
        pidfile=$STATE/$name.pid
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile")
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "${name#munge/}" ] || continue
        kill "$pid" 2>/dev/null || continue
        for _ in $(seq 40); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.25
        done
        kill -9 "$pid" 2>/dev/null || true
    done
}

stop() {
    stop_daemons
    unlink_default_conf
    rm -rf "$STATE"
}

unlink_default_conf() {
    if [ "$(readlink "$DEFAULT_CONF")" = "$CONF" ]; then rm "$DEFAULT_CONF"; fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    env) echo "SLURM_CONF=$CONF" ;;
    *)
        echo "usage: $0 start|stop|env" >&2
        exit 2
        ;;
esac
