#!/usr/bin/env bash
# scripts/slurm.sh: a Slurm cluster of simulated hosts on this machine, for one command.
# See usage().
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/slurm.sh [options] -- command [args...]

Starts Debian's slurm-wlm (scripts/setup-debian.sh installs it) as a cluster of N
nodes on this machine, runs the command on the cluster's login host, then removes
the cluster. Each node is a network namespace with its own host name (node0,
node1, ...: Chorus sees separate machines), its own /dev/shm and the address
10.78.0.<i+2>, and runs a slurmd declaring C CPUs (more than the machine has is
fine: tasks share its cores). The controller (slurmctld) and the command run on
the login host, `login`, 10.78.0.1. Every namespace's /etc/hosts names them all,
so a task can reach the first node of SLURM_JOB_NODELIST by its name. The
command's environment has SLURM_CONF, so srun, sbatch, squeue, scontrol and
sinfo use the cluster, e.g.

  scripts/slurm.sh -- srun -N 2 -n 4 build/tools/chorus-perf/chorus-perf -c 1

The daemons authenticate nothing (auth/none): they listen only on the
namespaces' private bridge, which no other process of this machine can reach.

options:
  -N, --nodes N      nodes, 1 to 16 (default 2)
  -c, --cpus C       CPUs each node declares, 1 to 64 (default 2)
  --timeout S        stop the command after S seconds (default 600)
  --logs DIR         keep the daemons' logs in DIR (default: removed at exit)
  -h, --help         this text

Exit status: the command's; 124 when it ran out of time; 1 when the cluster did
not come up (the daemons' logs are printed); 2 for bad usage; 77 when this
machine cannot run it (not root; no slurmctld, slurmd or srun, Debian:
slurm-wlm; no ip or unshare; namespaces refused). Whatever happens (a failing
command, Ctrl-C, SIGTERM, even SIGKILL of this script), the daemons, every
process of the command, the namespaces and the cluster's state directory are
removed: on exit, and by a watcher process that outlives this script.
EOF
}

readonly kSkip=77
readonly kSubnet=10.78.0
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="chorusslurm-$$"

. "$root/scripts/netns.sh"

# --- options -------------------------------------------------------------------------------
nodes=2
cpus=2
timeout_s=600
keep_logs=""
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    -N | --nodes) need_value "$@"; nodes="$2"; shift 2 ;;
    -c | --cpus) need_value "$@"; cpus="$2"; shift 2 ;;
    --timeout) need_value "$@"; timeout_s="$2"; shift 2 ;;
    --logs) need_value "$@"; keep_logs="$2"; shift 2 ;;
    --) shift; break ;;
    *) die 2 "unknown option '$1' (the command comes after --; try --help)" ;;
  esac
done
integer_in --nodes "$nodes" 1 16
integer_in --cpus "$cpus" 1 64
integer_in --timeout "$timeout_s" 1 86400
[ $# -gt 0 ] || die 2 "no command given (usage: slurm.sh [options] -- command [args...])"
if [ -n "$keep_logs" ]; then
  mkdir -p "$keep_logs" || die 2 "cannot create --logs directory '$keep_logs'"
fi

# --- can this machine run it? ----------------------------------------------------------------
cannot="cannot start Slurm here:"
[ "$(id -u)" -eq 0 ] || die $kSkip "$cannot its daemons and namespaces need root (uid $(id -u))"
for tool in slurmctld slurmd srun sinfo; do
  command -v "$tool" >/dev/null || die $kSkip "$cannot no '$tool' (Debian: slurm-wlm)"
done
for tool in ip unshare mount timeout; do
  command -v "$tool" >/dev/null || die $kSkip "$cannot no '$tool' (Debian: iproute2, util-linux)"
done

state="$(mktemp -d "${TMPDIR:-/tmp}/chorusslurm.XXXXXX")"
logs="$state/log"
mkdir -p "$logs" "$state/ctld"
on_exit() {
  local status=$?
  trap - EXIT INT TERM HUP
  exec 2>/dev/null  # not bash's notices of the background jobs killed here
  netns_remove_all "$prefix"
  [ -n "$keep_logs" ] && cp -r "$logs/." "$keep_logs/" 2>/dev/null
  rm -rf "$state"
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
netns_watch "$prefix" "$state"

# --- the hosts -------------------------------------------------------------------------------
netns_switch "$prefix"
netns_add_host "$prefix" "$prefix-login" portlogin "$kSubnet.1"
printf '127.0.0.1 localhost\n%s.1 login\n' "$kSubnet" >"$state/hosts"
for ((i = 0; i < nodes; ++i)); do
  netns_add_host "$prefix" "$prefix-node$i" "port$i" "$kSubnet.$((i + 2))"
  echo "$kSubnet.$((i + 2)) node$i" >>"$state/hosts"
done

# on_host NAME CMD...: CMD in host NAME's namespaces: its network, its host name, its /dev/shm
# and the cluster's /etc/hosts. /sys/fs/cgroup is an empty tmpfs: slurmd initialises its cgroup
# plugin even when nothing uses cgroups (as here), and an empty cgroup v1 tree satisfies it
# whatever this machine's cgroup layout is.
on_host() {
  local name=$1
  shift
  ip netns exec "$prefix-$name" unshare --uts --mount -- sh -c \
    'hostname "$0" && mount --bind "$1" /etc/hosts &&
     mount -t tmpfs -o mode=1777 tmpfs /dev/shm && mount -t tmpfs tmpfs /sys/fs/cgroup &&
     shift && exec "$@"' "$name" "$state/hosts" "$@"
}

# --- the cluster -----------------------------------------------------------------------------
# One partition of every node; no accounting, cgroups or authentication. Nodes report the CPUs
# declared here rather than the machine's (SlurmdParameters=config_overrides). The daemons run
# in the foreground (-D) and log to their standard error, kept in $logs/<daemon>.log.
export SLURM_CONF="$state/slurm.conf"
cat >"$SLURM_CONF" <<EOF
ClusterName=chorus
SlurmctldHost=login($kSubnet.1)
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool-%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmdParameters=config_overrides
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
KillWait=2
MailProg=/bin/true
NodeName=node[0-$((nodes - 1))] NodeAddr=$kSubnet.[2-$((nodes + 1))] CPUs=$cpus State=UNKNOWN
PartitionName=chorus Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF

# slurmd's cgroup plugin, which finds an empty tmpfs at /sys/fs/cgroup (on_host).
echo "CgroupPlugin=cgroup/v1" >"$state/cgroup.conf"

print_logs() {
  local log
  for log in "$logs"/*.log; do
    [ -f "$log" ] || continue
    echo "== $(basename "$log") (last 20 lines) =="
    tail -n 20 "$log"
  done >&2
}

daemons=()
on_host login slurmctld -D -c -f "$SLURM_CONF" </dev/null >"$logs/slurmctld.log" 2>&1 &
daemons+=($!)
for ((i = 0; i < nodes; ++i)); do
  mkdir -p "$state/spool-node$i"
  on_host "node$i" slurmd -D -N "node$i" -f "$SLURM_CONF" </dev/null \
    >"$logs/slurmd-node$i.log" 2>&1 &
  daemons+=($!)
done

# Up when every node is idle (sinfo -N prints one line per node); down as soon as a daemon
# has exited.
deadline=$((SECONDS + 60))
while :; do
  idle="$(on_host login sinfo -h -N -o %T 2>/dev/null | grep -c '^idle$')"
  [ "$idle" -eq "$nodes" ] && break
  for pid in "${daemons[@]}"; do
    kill -0 "$pid" 2>/dev/null && continue
    print_logs
    die 1 "a Slurm daemon exited while the cluster was starting (its logs above)"
  done
  if [ "$SECONDS" -ge "$deadline" ]; then
    print_logs
    die 1 "the cluster did not come up within 60 s ($idle of $nodes nodes idle)"
  fi
  sleep 0.5
done

# In the background, so that a signal to this script is handled at once (bash runs traps only
# between foreground commands).
on_host login timeout --kill-after=5 "$timeout_s" "$@" &
wait $!
status=$?
[ "$status" -eq 124 ] && echo "slurm.sh: '$*' ran out of time (--timeout $timeout_s)" >&2
exit "$status"
