// Shared-memory rendezvous; see shm_mesh.hpp.
#include "transport/shm/shm_mesh.hpp"

#include "bootstrap/store_exchange.hpp"
#include "core/env.hpp"
#include "transport/shm/inbox.hpp"
#include "transport/shm/shm_link.hpp"
#include "transport/shm_budget.hpp"

#include <chorus/error.hpp>

#include <algorithm>
#include <charconv>
#include <map>

namespace chorus::transport::shm {
namespace {

constexpr std::uint64_t kMinRingBytes = shm_budget::kRingFloor;
constexpr std::uint64_t kMaxRingBytes = std::uint64_t{256} << 20;

bool valid_capacity(std::uint64_t bytes) {
  return bytes >= kMinRingBytes && bytes <= kMaxRingBytes && (bytes & (bytes - 1)) == 0;
}

std::uint64_t parse_capacity(const std::string& text, const std::string& what) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !valid_capacity(value)) {
    throw Error(Status::InvalidArgument,
                what + " is \"" + text + "\"; expected a power of two from 256 to 268435456");
  }
  return value;
}

int slot_of(const std::vector<int>& host_ranks, int rank) {
  return static_cast<int>(std::find(host_ranks.begin(), host_ranks.end(), rank) -
                          host_ranks.begin());
}

}  // namespace

std::uint64_t ring_capacity(int host_ranks) {
  std::string text = env_or("CHORUS_SHM_RING_BYTES", "");
  if (!text.empty()) return parse_capacity(text, "CHORUS_SHM_RING_BYTES");
  return shm_budget::ring_bytes(host_ranks);
}

ShmMesh connect_shm_mesh(Store& store, int rank, const std::vector<int>& host_ranks,
                         const std::vector<RankInfo>& infos, const ShmOptions& options) {
  const int slots = static_cast<int>(host_ranks.size());
  const int leader = host_ranks.front();
  const std::string ready_key = "transport/shm/ready/" + std::to_string(leader);
  std::shared_ptr<Segment> segment;
  InboxGeometry geometry{slots, 0};
  if (rank == leader) {
    geometry.ring_capacity = ring_capacity(std::max(slots, options.sized_for));
    segment = create_inboxes(inbox_name(infos[rank].token, rank), host_ranks, geometry);
    store.set(ready_key,
              SegmentNotice{std::to_string(geometry.ring_capacity), segment->locator()}.text());
  } else {
    const SegmentNotice notice = SegmentNotice::parse(store.get(ready_key, options.deadline));
    geometry.ring_capacity = parse_capacity(
        notice.field, "the ring size of the inboxes of rank " + std::to_string(leader));
    segment =
        Segment::open(notice.locator, geometry.inbox_bytes() * host_ranks.size(), options.deadline);
  }
  const int my_slot = slot_of(host_ranks, rank);
  const Inbox my_inbox = Inbox::at(segment, my_slot, rank, geometry);
  segment->populate(my_slot * geometry.inbox_bytes(), geometry.inbox_bytes());
  std::map<int, Inbox> peer_inboxes;
  for (int slot = 0; slot < slots; ++slot) {
    const int peer = host_ranks[static_cast<std::size_t>(slot)];
    if (peer == rank) continue;
    Inbox inbox = Inbox::at(segment, slot, peer, geometry);
    inbox.populate_for(my_slot);
    peer_inboxes.emplace(peer, std::move(inbox));
  }
  store_barrier(store, "transport/shm/mapped/" + std::to_string(leader), slots, options.deadline);
  segment->withdraw();

  std::vector<pid_t> pids;
  for (int r : host_ranks) pids.push_back(r == rank ? 0 : static_cast<pid_t>(infos[r].pid));
  auto watch = std::make_shared<ProcessWatch>(std::move(pids));
  ShmMesh mesh;
  mesh.links.resize(infos.size());
  mesh.doorbell = my_inbox.doorbell();
  for (auto& [peer, inbox] : peer_inboxes) {
    mesh.links[peer] =
        std::make_unique<ShmLink>(peer, static_cast<pid_t>(infos[peer].pid), my_inbox, inbox,
                                  my_slot, slot_of(host_ranks, peer), watch);
  }
  return mesh;
}

}  // namespace chorus::transport::shm
