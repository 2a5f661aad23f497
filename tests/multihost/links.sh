#!/usr/bin/env bash
# Run by scripts/hosts.sh --during: samples every simulated host's established TCP connections
# until the job's processes are gone, and fails if ranks of one host talked over TCP (they
# share memory) or, in the first job (HOSTS_JOB 0, long enough to be seen), if ranks of
# different hosts never did. Connections to or from the store (HOSTS_PORT + 1) are not data
# links and are ignored.
set -uo pipefail
store_port=$((HOSTS_PORT + 1))
read -r -a namespaces <<<"$HOSTS_NETNS"
seen_cross=0
intra=""
while :; do
  alive=0
  for ns in "${namespaces[@]}"; do
    [ -n "$(ip netns pids "$ns")" ] && alive=1
    while read -r local peer; do
      [ "${local##*:}" = "$store_port" ] || [ "${peer##*:}" = "$store_port" ] && continue
      if [ "${local%:*}" = "${peer%:*}" ]; then
        intra+="  ${ns##*-}: $local <-> $peer"$'\n'
      else
        seen_cross=1
      fi
    done < <(ip netns exec "$ns" ss -Htn state established | awk '{print $3, $4}')
  done
  [ "$alive" -eq 0 ] && break
  sleep 0.1
done
if [ -n "$intra" ]; then
  echo "links: ranks of one host connected over TCP instead of shared memory:"
  printf '%s' "$intra" | sort -u
  exit 1
fi
if [ "$seen_cross" -eq 0 ] && [ "$HOSTS_JOB" -eq 0 ]; then
  echo "links: never saw a TCP data connection between two hosts"
  exit 1
fi
echo "links: TCP only between hosts (seen: $seen_cross), none inside a host"
