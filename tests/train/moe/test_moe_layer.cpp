// The MoE layer at ep 1-4 (and ep 2 with two expert-data-parallel replicas) against a
// one-process reference written token by token in plain torch: the same seed, the same global
// tokens (uneven per rank, one rank without any at 3 and 4 ranks), routing asserted identical
// first, then output, aux and z losses and every gradient (rtol 1e-10, fp64) after the
// gradient reduction of MoeGradientReducers; top-1 and top-2, with capacity and dropless.
#include <chorus/train/moe.hpp>
#include <chorus/train/random.hpp>

#include "../tensor_parallel/tp_test_util.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace chorus::train {
namespace {

using tp_test::expect_close;

constexpr std::int64_t kGroup = 8;

MoeOptions options_of(int k, bool dropless) {
  return {
      .hidden = 6,
      .ffn = 10,
      .experts = 12,
      .routing = {.top_k = k, .capacity_factor = 1.5, .dropless = dropless, .group_tokens = kGroup},
      .z_loss_coef = 1e-3,
      .seed = 11,
      .name = "layers.1.moe",
      .init_std = 0.4,
      .dtype = at::kDouble};
}

at::Tensor parameter(const MoeOptions& o, const std::string& name, at::IntArrayRef shape) {
  return init_slice({.seed = o.seed, .name = o.name + name, .scale = o.init_std, .dtype = o.dtype},
                    shape)
      .requires_grad_();
}

/// Every expert of the layer, whole, and the router.
struct Reference {
  at::Tensor router;
  std::vector<at::Tensor> fc1w, fc1b, fc2w, fc2b;
};

Reference make_reference(const MoeOptions& o) {
  Reference r;
  r.router = parameter(o, ".router.weight", {o.experts, o.hidden});
  for (std::int64_t e = 0; e < o.experts; ++e) {
    const std::string p = ".experts." + std::to_string(e);
    r.fc1w.push_back(parameter(o, p + ".fc1.weight", {o.ffn, o.hidden}));
    r.fc1b.push_back(torch::zeros({o.ffn}, at::kDouble).requires_grad_());
    r.fc2w.push_back(parameter(o, p + ".fc2.weight", {o.hidden, o.ffn}));
    r.fc2b.push_back(torch::zeros({o.hidden}, at::kDouble).requires_grad_());
  }
  return r;
}

/// What the reference computes for the global tokens.
struct ReferenceRun {
  at::Tensor output;                                        ///< [N, h]
  std::vector<at::Tensor> group_aux;                        ///< per routing group
  at::Tensor z_per_token;                                   ///< β·logsumexp², [N]
  std::vector<std::pair<std::int64_t, std::int64_t>> kept;  ///< (expert, token), sorted
  double margin = 1;  ///< smallest gap between a token's k-th and (k+1)-th probability
};

/// Experts of token row `p` best first (ties: lower index), as a plain sort.
std::vector<std::int64_t> ranked(const std::vector<double>& p) {
  std::vector<std::int64_t> order(p.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return p[a] > p[b]; });
  return order;
}

ReferenceRun run_reference(const Reference& ref, const MoeOptions& o, const at::Tensor& x) {
  const std::int64_t n = x.size(0), k = o.routing.top_k, experts = o.experts;
  const at::Tensor logits = x.matmul(ref.router.t());
  const at::Tensor probs = at::softmax(logits, 1);
  ReferenceRun run;
  run.z_per_token = o.z_loss_coef * at::logsumexp(logits, 1).pow(2);
  std::vector<at::Tensor> rows(n);
  for (std::int64_t first = 0; first < n; first += kGroup) {
    std::vector<std::vector<std::pair<double, std::int64_t>>> wanted(experts);
    std::vector<double> sent(experts, 0);
    for (std::int64_t t = first; t < first + kGroup; ++t) {
      std::vector<double> p(experts);
      for (std::int64_t e = 0; e < experts; ++e) p[e] = probs[t][e].item<double>();
      const std::vector<std::int64_t> order = ranked(p);
      run.margin = std::min(run.margin, p[order[k - 1]] - p[order[k]]);
      for (std::int64_t s = 0; s < k; ++s) {
        wanted[order[s]].push_back({-p[order[s]], t});
        sent[order[s]] += 1;
      }
    }
    const std::int64_t capacity =
        static_cast<std::int64_t>(std::ceil(kGroup * k * o.routing.capacity_factor / experts));
    at::Tensor aux = at::zeros({}, at::kDouble);
    const at::Tensor mean_prob = probs.narrow(0, first, kGroup).mean(0);
    for (std::int64_t e = 0; e < experts; ++e) {
      aux = aux + sent[e] / static_cast<double>(kGroup * k) * mean_prob[e];
      std::sort(wanted[e].begin(), wanted[e].end());
      if (!o.routing.dropless && static_cast<std::int64_t>(wanted[e].size()) > capacity)
        wanted[e].resize(capacity);
      for (auto [negative_p, t] : wanted[e]) run.kept.push_back({e, t});
    }
    run.group_aux.push_back(o.aux_loss_coef * experts * aux);
  }
  std::sort(run.kept.begin(), run.kept.end());
  std::vector<std::vector<std::int64_t>> experts_of(n);
  for (auto [e, t] : run.kept) experts_of[t].push_back(e);
  for (std::int64_t t = 0; t < n; ++t) {
    at::Tensor row = at::zeros({o.hidden}, at::kDouble);
    std::vector<double> p(experts);
    for (std::int64_t e = 0; e < experts; ++e) p[e] = probs[t][e].item<double>();
    const std::vector<std::int64_t> order = ranked(p);
    const at::Tensor top = k == 1 ? probs[t][order[0]] : probs[t][order[0]] + probs[t][order[1]];
    for (std::int64_t e : experts_of[t]) {
      const at::Tensor gate = k == 1 ? probs[t][e] : probs[t][e] / top;
      const at::Tensor inner = at::gelu(ref.fc1w[e].mv(x[t]) + ref.fc1b[e]);
      row = row + gate * (ref.fc2w[e].mv(inner) + ref.fc2b[e]);
    }
    rows[t] = row;
  }
  run.output = at::stack(rows);
  return run;
}

struct Case {
  int world, ep, k;
  bool dropless;
};

/// p.grad(), zeros when nothing reached p (an expert no token was routed to).
at::Tensor grad_of(const at::Tensor& p) {
  return p.grad().defined() ? p.grad() : at::zeros_like(p);
}

/// The kinds of the ledger's calls on the expert group since the last call (others dropped).
std::vector<CollectiveKind> ep_calls(const Mesh& mesh) {
  std::vector<CollectiveKind> out;
  for (const LedgerEntry& e : mesh.ledger()->take())
    if (e.group == "ep") out.push_back(e.kind);
  return out;
}

std::int64_t tokens_of(int rank) { return kGroup * ((rank + 1) % 3); }

void check_layer(const Case& c) {
  SCOPED_TRACE("world " + std::to_string(c.world) + ", ep " + std::to_string(c.ep) + ", k " +
               std::to_string(c.k) + (c.dropless ? ", dropless" : ", capacity"));
  torch::set_num_threads(1);
  const MoeOptions o = options_of(c.k, c.dropless);
  std::vector<std::int64_t> offset{0};
  for (int r = 0; r < c.world; ++r) offset.push_back(offset.back() + tokens_of(r));
  const std::int64_t total = offset.back(), groups = total / kGroup;
  // Inputs whose top-k margin is under 1e-6 could route differently: take the next salt.
  Reference ref = make_reference(o);
  at::Tensor x, weight;
  ReferenceRun run;
  for (std::uint64_t salt = 0;; ++salt) {
    x = init_slice({.seed = salt, .name = "x", .dtype = at::kDouble}, {total, o.hidden})
            .requires_grad_();
    run = run_reference(ref, o, x);
    if (run.margin >= 1e-6) break;
    ref = make_reference(o);
  }
  const std::size_t assignments = total * c.k;
  if (c.dropless) {
    EXPECT_EQ(run.kept.size(), assignments);
  } else {
    EXPECT_LT(run.kept.size(), assignments) << "the capacity case drops nothing";
  }
  weight = init_slice({.seed = 3, .name = "c", .dtype = at::kDouble}, {total, o.hidden});
  const at::Tensor aux_total = at::stack(run.group_aux).mean();
  ((run.output * weight).sum() / total + aux_total + run.z_per_token.mean()).backward();

  chorus::testing::ThreadJob job(c.world);
  ASSERT_TRUE(job.ok());
  job.run([&](Communicator& comm) {
    const int rank = comm.rank();
    SCOPED_TRACE("rank " + std::to_string(rank));
    Mesh mesh(comm, {.degrees = {.ep = c.ep}});
    mesh.ledger()->enable();
    MoeLayer layer(o, mesh);
    MoeGradientReducers reducers(mesh, layer.expert_parameters(), layer.dense_parameters());
    const std::int64_t n = tokens_of(rank), first = offset[rank];
    const at::Tensor x_local = x.detach().narrow(0, first, n).clone().requires_grad_();
    reducers.begin_step();
    const MoeOutput out = layer.forward(x_local);

    // Routing first: the same (expert, token) pairs kept for this rank's tokens.
    std::vector<std::pair<std::int64_t, std::int64_t>> expected, got;
    for (auto [e, t] : run.kept)
      if (t >= first && t < first + n) expected.push_back({e, t - first});
    const MoeStats& stats = layer.last_stats();
    for (std::int64_t i = 0; i < stats.token.numel(); ++i)
      got.push_back({stats.expert[i].item<std::int64_t>(), stats.token[i].item<std::int64_t>()});
    ASSERT_EQ(got, expected);
    EXPECT_EQ(stats.assignments - stats.dropped, static_cast<std::int64_t>(expected.size()));
    if (c.dropless) {
      EXPECT_EQ(stats.dropped, 0);
    }

    const std::int64_t my_groups = n / kGroup;
    if (n > 0) {
      expect_close(out.output, run.output.narrow(0, first, n).detach(), "output");
      std::vector<at::Tensor> mine(run.group_aux.begin() + first / kGroup,
                                   run.group_aux.begin() + first / kGroup + my_groups);
      expect_close(out.aux_loss, at::stack(mine).mean().detach(), "aux loss");
      expect_close(out.z_loss, run.z_per_token.narrow(0, first, n).mean().detach(), "z loss");
    }
    // The global loss is the mean over the dp·cp ranks of these (the reducers average).
    const double ranks = c.world;
    const at::Tensor loss = ranks * ((out.output * weight.narrow(0, first, n)).sum() / total +
                                     out.aux_loss * (static_cast<double>(my_groups) / groups) +
                                     out.z_loss * (static_cast<double>(n) / total));
    using enum CollectiveKind;
    using Calls = std::vector<CollectiveKind>;
    const Calls forward = c.ep > 1 ? Calls{AllToAll, AllToAllV, AllToAllV} : Calls{};
    EXPECT_EQ(ep_calls(mesh), forward);
    loss.backward();
    const Calls backward = c.ep > 1 ? Calls{AllToAllV, AllToAllV} : Calls{};
    EXPECT_EQ(ep_calls(mesh), backward);
    reducers.finish_step();

    if (n > 0) {
      expect_close(x_local.grad() / ranks, x.grad().narrow(0, first, n), "input gradient");
    }
    expect_close(layer.router_weight().grad(), ref.router.grad(), "router gradient");
    for (std::int64_t e = 0; e < layer.local_experts(); ++e) {
      const std::int64_t g = layer.first_expert() + e;
      const std::string name = "expert " + std::to_string(g);
      expect_close(layer.fc1_weight(e).grad(), grad_of(ref.fc1w[g]), name + " fc1.weight");
      expect_close(layer.fc1_bias(e).grad(), grad_of(ref.fc1b[g]), name + " fc1.bias");
      expect_close(layer.fc2_weight(e).grad(), grad_of(ref.fc2w[g]), name + " fc2.weight");
      expect_close(layer.fc2_bias(e).grad(), grad_of(ref.fc2b[g]), name + " fc2.bias");
    }
  });
}

TEST(MoeLayer, EqualsTheOneProcessReferenceAtEveryExpertDegree) {
  for (const auto& [world, ep] : {std::pair{1, 1}, {2, 2}, {3, 3}, {4, 4}, {4, 2}})
    for (int k = 1; k <= 2; ++k)
      for (bool dropless : {false, true}) check_layer({world, ep, k, dropless});
}

}  // namespace
}  // namespace chorus::train
