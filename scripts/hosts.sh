#!/usr/bin/env bash
# scripts/hosts.sh: runs a Chorus job across H simulated hosts on this machine. See usage().
set -uo pipefail

usage() {
  cat <<'EOF'
usage: scripts/hosts.sh [options] -- program [args...] [--then program [args...]]...

Simulates H hosts on this machine and runs a Chorus job across them: one network
namespace per host, each with its own host name (so Chorus sees H machines: shared
memory between the ranks of a host, TCP between hosts), its own /dev/shm, and an
eth0 joined to a switch (a bridge in a namespace of its own) by a veth pair.
Host i (0-based) is called host<i> and has the address 10.77.0.<i+1>/24. In each
host the job runs as

  chorusrun --nnodes H --node-rank i --master-addr 10.77.0.1 --master-port PORT \
            -n R program [args...]

with one CHORUS_AUTH_TOKEN for every host (the caller's, else a fresh one).
"--then" separates jobs run one after the other on the same hosts; once one
fails, the rest are not run. Each host's output is printed after its job, then
one summary line per job.

options:
  -H, --hosts H          simulated hosts, 1 to 64 (default 2)
  -n, --ranks-per-host R ranks per host, 1 to 64 (default 2)
  --rate RATE            shape every link to RATE in each direction with tc's
                         token bucket (tbf), e.g. 2gbit, 500mbit (default: not
                         shaped). No latency or loss: this kernel may lack netem.
  --port PORT            the job's --master-port; its store uses PORT+1
                         (default 29500)
  --timeout S            stop a job that runs longer than S seconds (default 600)
  --max-restarts N       when a rank fails on any host, the hosts' chorusruns
                         restart the job together, up to N times (chorusrun
                         --max-restarts; default 0)
  --chorusrun PATH       the launcher (default: build/tools/chorusrun/chorusrun
                         of this checkout if built, else chorusrun in PATH)
  --logs DIR             keep each host's output as DIR/job<j>.host<i>.log
                         (default: a directory in $TMPDIR or /tmp, removed at exit)
  --quiet                print only the summary lines
  --during CMD           while each job runs, run `sh -c CMD` as an outsider: in a
                         namespace on the same switch, 10.77.0.254, running no
                         rank; HOSTS_NETNS (the hosts' namespaces, in host order,
                         for `ip netns exec`), HOSTS_ADDRS (their addresses),
                         HOSTS_PORT (the master port) and HOSTS_JOB (the job's
                         index, from 0) in its environment. It gets
                         10 s after the job ends to finish, and its non-zero exit
                         (or being stopped) fails the job
  -h, --help             this text

Exit status: 0 when every host of every job exited 0; 1 when one did not or
--during failed (a host that had to be stopped shows "timeout" after --timeout,
or "stopped" 10 s after another host failed); 2 for bad usage; 77 when this
machine cannot simulate hosts (not root, no `ip`, `unshare` or `tc`, or
namespaces refused).
Whatever happens (a failing job, Ctrl-C, SIGTERM, even SIGKILL of this script),
the namespaces, links and every process started in them are removed: on exit,
and by a watcher process that outlives this script.
EOF
}

readonly kSkip=77
readonly kSubnet=10.77.0
root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="chorushosts-$$"

# --- cleanup -------------------------------------------------------------------------------
# Every namespace this script creates is called chorushosts-<its pid>-<role> (scripts/netns.sh
# removes them with every process inside).
. "$root/scripts/netns.sh"

# --- options -------------------------------------------------------------------------------
hosts=2
ranks=2
rate=""
port=29500
timeout_s=600
max_restarts=0
chorusrun=""
logs=""
quiet=0
during=""
jobs=()  # each job as one string of NUL-separated words
while [ $# -gt 0 ]; do
  case "$1" in
    -h | --help) usage; exit 0 ;;
    -H | --hosts) need_value "$@"; hosts="$2"; shift 2 ;;
    -n | --ranks-per-host) need_value "$@"; ranks="$2"; shift 2 ;;
    --rate) need_value "$@"; rate="$2"; shift 2 ;;
    --port) need_value "$@"; port="$2"; shift 2 ;;
    --timeout) need_value "$@"; timeout_s="$2"; shift 2 ;;
    --max-restarts) need_value "$@"; max_restarts="$2"; shift 2 ;;
    --chorusrun) need_value "$@"; chorusrun="$2"; shift 2 ;;
    --logs) need_value "$@"; logs="$2"; shift 2 ;;
    --quiet) quiet=1; shift ;;
    --during) need_value "$@"; during="$2"; shift 2 ;;
    --) shift; break ;;
    *) die 2 "unknown option '$1' (the program comes after --; try --help)" ;;
  esac
done
integer_in --hosts "$hosts" 1 64
integer_in --ranks-per-host "$ranks" 1 64
integer_in --port "$port" 1 65534
integer_in --max-restarts "$max_restarts" 0 1000
integer_in --timeout "$timeout_s" 1 86400
[ $# -gt 0 ] || die 2 "no program given (usage: hosts.sh [options] -- program [args...])"
current=""
for word in "$@"; do
  if [ "$word" = "--then" ]; then
    [ -n "$current" ] || die 2 "--then must follow a program and be followed by one"
    jobs+=("$current")
    current=""
  else
    current+="$word"$'\x1f'
  fi
done
[ -n "$current" ] || die 2 "--then must follow a program and be followed by one"
jobs+=("$current")

# tbf needs a burst of at least a few milliseconds of traffic at its rate to reach it.
burst_bytes=0
if [ -n "$rate" ]; then
  [[ "$rate" =~ ^([0-9]+)(k|m|g)bit$ ]] ||
    die 2 "--rate must be a number followed by kbit, mbit or gbit (e.g. 2gbit), got '$rate'"
  declare -A unit=([k]=1000 [m]=1000000 [g]=1000000000)
  bits=$((BASH_REMATCH[1] * ${unit[${BASH_REMATCH[2]}]}))
  [ "$bits" -gt 0 ] || die 2 "--rate must be above 0, got '$rate'"
  burst_bytes=$((bits / 8 / 500))  # 2 ms
  [ "$burst_bytes" -ge 65536 ] || burst_bytes=65536
fi

if [ -z "$chorusrun" ]; then
  chorusrun="$root/build/tools/chorusrun/chorusrun"
  [ -x "$chorusrun" ] || chorusrun="$(command -v chorusrun || true)"
  [ -n "$chorusrun" ] || die 2 "no chorusrun: build it (scripts/build.sh build) or pass --chorusrun"
fi
[ -x "$chorusrun" ] || die 2 "--chorusrun '$chorusrun' is not an executable file"

# --- can this machine simulate hosts? -------------------------------------------------------
cannot="cannot simulate hosts:"
[ "$(id -u)" -eq 0 ] || die $kSkip "$cannot network namespaces need root (uid $(id -u))"
for tool in ip unshare mount awk; do
  command -v "$tool" >/dev/null || die $kSkip "$cannot no '$tool' (Debian: iproute2, util-linux)"
done
[ -z "$rate" ] || command -v tc >/dev/null || die $kSkip "$cannot --rate needs tc (iproute2)"

if [ -n "$logs" ]; then
  mkdir -p "$logs" || die 2 "cannot create --logs directory '$logs'"
  logs="$(cd "$logs" && pwd)"
  own_logs=0
else
  logs="$(mktemp -d "${TMPDIR:-/tmp}/chorushosts.XXXXXX")"
  own_logs=1
fi

node_pids=()
during_pid=""
on_exit() {
  local status=$?
  trap - EXIT INT TERM HUP
  [ -n "$during_pid" ] && kill -TERM -- "-$during_pid" 2>/dev/null
  netns_remove_all "$prefix"
  [ "$own_logs" -eq 1 ] && rm -rf "$logs"
  exit "$status"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
watched_logs=""
[ "$own_logs" -eq 1 ] && watched_logs="$logs"
netns_watch "$prefix" "$watched_logs"

# --- the network ----------------------------------------------------------------------------
# Host i's eth0 is joined to the bridge's port<i> (scripts/netns.sh); shaping (tbf) applies to
# both ends' egress.
shape() {  # shape NAMESPACE DEVICE
  [ -z "$rate" ] && return 0
  netns_run tc -n "$1" qdisc add dev "$2" root tbf rate "$rate" burst "$burst_bytes" latency 100ms
}

add_host_link() {  # add_host_link NAMESPACE INDEX ADDRESS
  netns_add_host "$prefix" "$1" "port$2" "$3"
  shape "$1" eth0
  shape "$prefix-switch" "port$2"
}

netns_switch "$prefix"
host_ns=()
host_addrs=()
for ((i = 0; i < hosts; ++i)); do
  host_ns+=("$prefix-host$i")
  host_addrs+=("$kSubnet.$((i + 1))")
  add_host_link "${host_ns[i]}" "$i" "${host_addrs[i]}"
done
if [ -n "$during" ]; then add_host_link "$prefix-outsider" outsider "$kSubnet.254"; fi

# --- the jobs -------------------------------------------------------------------------------
: "${CHORUS_AUTH_TOKEN:=$(od -An -N32 -tx1 /dev/urandom | tr -d ' \n')}"
export CHORUS_AUTH_TOKEN

start_node() {  # start_node JOB HOST WORD...: chorusrun of node HOST in its namespace
  local job=$1 i=$2
  shift 2
  ip netns exec "${host_ns[i]}" unshare --uts --mount -- sh -c \
    'hostname "$0" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec "$@"' "host$i" \
    "$chorusrun" --nnodes "$hosts" --node-rank "$i" --master-addr "${host_addrs[0]}" \
    --master-port "$port" --max-restarts "$max_restarts" -n "$ranks" "$@" \
    >"$logs/job$job.host$i.log" 2>&1 </dev/null &
  node_pids[i]=$!
}

# wait_nodes: waits for every node; once one fails the others get 10 s to notice, then are
# stopped; the whole job gets timeout_s. Sets statuses[i]: the exit status, or "timeout" or
# "stopped" (after another node failed) for a node that had to be stopped.
wait_nodes() {
  local start=$SECONDS failed_at="" i pid
  statuses=()
  while :; do
    local running=0
    for ((i = 0; i < hosts; ++i)); do
      [ -n "${statuses[i]:-}" ] && continue
      pid=${node_pids[i]}
      if kill -0 "$pid" 2>/dev/null; then
        running=1
      else
        wait "$pid"
        statuses[i]=$?
        [ "${statuses[i]}" -ne 0 ] && [ -z "$failed_at" ] && failed_at=$SECONDS
      fi
    done
    [ "$running" -eq 0 ] && return
    local verdict=""
    [ $((SECONDS - start)) -ge "$timeout_s" ] && verdict="timeout"
    [ -n "$failed_at" ] && [ $((SECONDS - failed_at)) -ge 10 ] && verdict="stopped"
    if [ -n "$verdict" ]; then
      remove_processes_of_job
      for ((i = 0; i < hosts; ++i)); do
        [ -n "${statuses[i]:-}" ] && continue
        wait "${node_pids[i]}" 2>/dev/null
        statuses[i]=$verdict
      done
      return
    fi
    sleep 0.2
  done
}

remove_processes_of_job() {
  local pids
  pids="$(for ns in "${host_ns[@]}"; do ip netns pids "$ns"; done)"
  [ -n "$pids" ] && kill -TERM $pids 2>/dev/null
  sleep 2
  pids="$(for ns in "${host_ns[@]}"; do ip netns pids "$ns"; done)"
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
}

start_during() {
  [ -z "$during" ] && return 0
  HOSTS_NETNS="${host_ns[*]}" HOSTS_ADDRS="${host_addrs[*]}" HOSTS_PORT="$port" HOSTS_JOB="$1" \
    setsid ip netns exec "$prefix-outsider" sh -c "$during" \
    >"$logs/job$1.during.log" 2>&1 </dev/null &
  during_pid=$!
}

# finish_during: after the job, the --during command gets 10 s to finish, then is stopped.
# Sets during_status ("" without --during, "timeout" when it had to be stopped).
finish_during() {
  during_status=""
  [ -z "$during_pid" ] && return 0

  for _ in $(seq 50); do
    kill -0 "$during_pid" 2>/dev/null || break
    sleep 0.2
  done
  if kill -0 "$during_pid" 2>/dev/null; then
    kill -KILL -- "-$during_pid" 2>/dev/null
    wait "$during_pid" 2>/dev/null
    during_status=timeout
  else
    wait "$during_pid"
    during_status=$?
  fi
  during_pid=""
}

overall=0
for ((j = 0; j < ${#jobs[@]}; ++j)); do
  if [ "$overall" -ne 0 ]; then
    echo "job $j not run: an earlier job failed"
    continue
  fi
  IFS=$'\x1f' read -r -a words <<<"${jobs[j]%$'\x1f'}"
  for ((i = 0; i < hosts; ++i)); do start_node "$j" "$i" "${words[@]}"; done
  start_during "$j"
  wait_nodes
  finish_during
  summary="job $j (${words[*]}) on $hosts hosts x $ranks ranks${rate:+ at $rate}:"
  for ((i = 0; i < hosts; ++i)); do
    if [ "$quiet" -eq 0 ]; then
      echo "== job $j, host$i (${host_addrs[i]}): exit ${statuses[i]} =="
      cat "$logs/job$j.host$i.log"
    fi
    summary+=" host$i ${statuses[i]}"
    [ "${statuses[i]}" = 0 ] || overall=1
  done
  if [ -n "$during_status" ]; then
    if [ "$quiet" -eq 0 ]; then
      echo "== job $j, --during: exit $during_status =="
      cat "$logs/job$j.during.log"
    fi
    summary+=", --during $during_status"
    [ "$during_status" = 0 ] || overall=1
  fi
  echo "$summary"
done
exit "$overall"
