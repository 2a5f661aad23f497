#!/usr/bin/env bash
# scripts/netns.sh: simulated hosts in network namespaces, shared by scripts/hosts.sh and
# scripts/slurm.sh, which source it, with their error exit and option checks.
#
# Every namespace a script creates is called <prefix>-<role>, with prefix unique to the script's
# process (e.g. chorushosts-<pid>). The hosts hang off a bridge in <prefix>-switch, each by a
# veth pair: eth0 in the host, port<name> on the bridge. Nothing touches this machine's own
# network. `netns.sh --reap PID PREFIX [DIR]` (a watcher started with netns_watch) waits for
# PID to end, then removes PREFIX's namespaces with every process in them, and DIR.

# die STATUS SENTENCE: one line on stderr, named after the running script, then exit.
die() {
  echo "${0##*/}: $2" >&2
  exit "$1"
}

# need_value OPTION ARGS...: ends the script (status 2) when OPTION has no value after it.
need_value() { [ $# -ge 2 ] || die 2 "$1 needs a value (try --help)"; }

# integer_in OPTION VALUE MIN MAX: ends the script (status 2) unless VALUE is an integer in
# [MIN, MAX].
integer_in() {
  [[ "$2" =~ ^[0-9]+$ ]] && [ "$2" -ge "$3" ] && [ "$2" -le "$4" ] ||
    die 2 "$1 must be an integer from $3 to $4, got '$2'"
}

# netns_list PREFIX: the namespaces called PREFIX-*.
netns_list() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^$1-" || true; }

# netns_pids PREFIX: every process inside PREFIX's namespaces.
netns_pids() {
  local ns
  for ns in $(netns_list "$1"); do ip netns pids "$ns" 2>/dev/null; done
}

# netns_stop_processes PREFIX: SIGTERM to every process in PREFIX's namespaces, SIGKILL to
# those still there 2 s later. It waits on the pids it signalled (a scan of every process's
# namespaces costs tenths of a second on a busy machine), then scans once more for any
# process started meanwhile.
netns_stop_processes() {
  local pids
  pids="$(netns_pids "$1")"
  [ -z "$pids" ] && return 0
  kill -TERM $pids 2>/dev/null
  for _ in $(seq 20); do
    kill -0 $pids 2>/dev/null || break  # true while any of them is left
    sleep 0.1
  done
  pids="$(netns_pids "$1")"
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}

# netns_remove_all PREFIX: stops PREFIX's processes, then deletes its namespaces (which takes
# their veths and bridge with them).
netns_remove_all() {
  netns_stop_processes "$1"
  local ns
  for ns in $(netns_list "$1"); do ip netns del "$ns" 2>/dev/null; done
  return 0
}

# netns_watch PREFIX [DIR]: a watcher, in a session of its own (so that a signal to the
# caller's process group does not reach it), that cleans up after this shell even when it is
# killed with SIGKILL.
netns_watch() {
  setsid "${BASH_SOURCE[0]}" --reap $$ "$1" "${2:-}" </dev/null >/dev/null 2>&1 &
}

# netns_run CMD...: runs CMD, or ends the script (die 1) quoting CMD and its error output.
# Needs the caller's directory $logs.
netns_run() {
  "$@" 2>"$logs/ip.err" || die 1 "network setup failed: '$*': $(head -c 300 "$logs/ip.err")"
}

# netns_switch PREFIX: the bridge's namespace; ends the script with status 77 when this
# machine refuses namespaces.
netns_switch() {
  if ! ip netns add "$1-switch" 2>"$logs/ip.err"; then
    die 77 "cannot simulate hosts: 'ip netns add' failed: $(head -c 300 "$logs/ip.err")"
  fi
  netns_run ip -n "$1-switch" link add br0 type bridge forward_delay 0
  netns_run ip -n "$1-switch" link set br0 up
}

# netns_add_host PREFIX NAMESPACE PORT ADDRESS: a host namespace whose eth0 (ADDRESS/24) is
# joined to the bridge's port PORT.
netns_add_host() {
  netns_run ip netns add "$2"
  netns_run ip link add eth0 netns "$2" type veth peer name "$3" netns "$1-switch"
  netns_run ip -n "$2" addr add "$4/24" dev eth0
  netns_run ip -n "$2" link set lo up
  netns_run ip -n "$2" link set eth0 up
  netns_run ip -n "$1-switch" link set "$3" master br0
  netns_run ip -n "$1-switch" link set "$3" up
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = "--reap" ]; then
  while kill -0 "$2" 2>/dev/null; do sleep 0.5; done
  netns_remove_all "$3"
  [ -n "${4:-}" ] && rm -rf "$4"
  exit 0
fi
