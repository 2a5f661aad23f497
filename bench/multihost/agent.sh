#!/usr/bin/env bash
# Open MPI's remote shell (plm_rsh_agent) across simulated hosts: `agent.sh [-x] ADDR CMD...`
# runs CMD inside the namespace of the host whose address is ADDR (HOSTS_ADDRS and HOSTS_NETNS,
# from scripts/hosts.sh's --during), with that host's name and its own /dev/shm, as the
# Chorus ranks of that host run.
set -euo pipefail
[ "${1:-}" = "-x" ] && shift
addr=$1
shift
read -r -a addrs <<<"$HOSTS_ADDRS"
read -r -a spaces <<<"$HOSTS_NETNS"
for i in "${!addrs[@]}"; do
  if [ "${addrs[i]}" = "$addr" ]; then
    exec ip netns exec "${spaces[i]}" unshare --uts --mount -- sh -c \
      'hostname "$0" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && exec sh -c "$1"' \
      "host$i" "$*"
  fi
done
echo "agent.sh: no simulated host has address $addr" >&2
exit 1
