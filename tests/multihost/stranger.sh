#!/usr/bin/env bash
# Run by scripts/hosts.sh --during: waits until host0's ranks listen for their data
# connections (host1's ranks start late, so they wait for them), then has stranger.py, from
# the outsider's address on the job's network, connect to every port the hosts listen on: the
# store's and the ranks' data ports.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
store_port=$((HOSTS_PORT + 1))
read -r -a namespaces <<<"$HOSTS_NETNS"
read -r -a addresses <<<"$HOSTS_ADDRS"
# listening K: HOST:PORT of every IPv4 port host K listens on (a wildcard as its address).
listening() {
  ip netns exec "${namespaces[$1]}" ss -Hltn4 |
    awk -v a="${addresses[$1]}" '{sub(/^(0\.0\.0\.0|\*):/, a ":", $4); print $4}'
}
for _ in $(seq 100); do
  listening 0 | grep -vq ":$store_port\$" && break
  sleep 0.1
done
targets=()
for ((k = 0; k < ${#namespaces[@]}; ++k)); do
  while read -r address; do targets+=("$address"); done < <(listening "$k")
done
printf '%s\n' "${targets[@]}" | grep -vq ":$store_port\$" ||
  { echo "stranger: no rank listened for data connections (listening: ${targets[*]})"; exit 1; }
exec python3 "$here/stranger.py" "${targets[@]}"
