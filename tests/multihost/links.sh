#!/usr/bin/env bash
# Run by scripts/hosts.sh --during: watches every simulated host's established TCP connections
# while the job runs and fails unless ranks of one host never talk over TCP (they share memory)
# and ranks of different hosts do. Connections to or from the store (HOSTS_PORT + 1) are not
# data links and are ignored. Ends when the job's cross-host connections are gone, or after
# 300 s.
set -uo pipefail
store_port=$((HOSTS_PORT + 1))
deadline=$((SECONDS + 300))
seen_cross=0
intra=""
while [ "$SECONDS" -lt "$deadline" ]; do
  cross=0
  for ns in $HOSTS_NETNS; do
    while read -r local peer; do
      [ "${local##*:}" = "$store_port" ] || [ "${peer##*:}" = "$store_port" ] && continue
      if [ "${local%:*}" = "${peer%:*}" ]; then
        intra+="  ${ns##*-}: $local <-> $peer"$'\n'
      else
        cross=$((cross + 1))
      fi
    done < <(ip netns exec "$ns" ss -Htn state established | awk '{print $3, $4}')
  done
  [ "$cross" -gt 0 ] && seen_cross=1
  [ "$seen_cross" -eq 1 ] && [ "$cross" -eq 0 ] && break
  sleep 0.3
done
if [ -n "$intra" ]; then
  printf 'links: ranks of one host connected over TCP instead of shared memory:\n%s' "$intra"
  exit 1
fi
if [ "$seen_cross" -eq 0 ]; then
  echo "links: never saw a TCP data connection between two hosts"
  exit 1
fi
echo "links: TCP only between hosts, none inside a host"
