// The collectives' algorithms as schedules of point-to-point ops (comm/schedule.hpp).
//
// Sections: helpers · ring (all_reduce, all_gather, reduce_scatter, chain broadcast/reduce) ·
// trees (double binary all_reduce, binomial broadcast/reduce) · naive (root-centric) · barrier.
#include "dpscope/comm/schedule.hpp"

#include <algorithm>
#include <initializer_list>

#include "dpscope/base/error.hpp"

namespace dpscope {
namespace {

constexpr uint64_t kSliceBytes = 1u << 20;  // pipeline slice target: 1 MiB
constexpr int kMaxSlices = 16;

int mod(int a, int n) { return ((a % n) + n) % n; }

// Appends ops and their dependencies, keeping Schedule's invariants (deps come first).
class Builder {
 public:
  Builder(const char* algorithm, std::initializer_list<const char*> phases, int slices) {
    s_.algorithm = algorithm;
    for (const char* p : phases) s_.phases.emplace_back(p);
    s_.slices = slices;
  }

  int add(CommOp op, std::initializer_list<int> deps) {
    return add(op, std::span<const int>(deps.begin(), deps.size()));
  }
  int add(CommOp op, std::span<const int> deps) {
    op.dep_begin = static_cast<int32_t>(s_.deps.size());
    op.dep_count = 0;
    for (int d : deps) {
      if (d < 0) continue;
      DPS_ASSERT(d < static_cast<int>(s_.ops.size()), "dependency {} of op {} is not earlier", d,
                 s_.ops.size());
      s_.deps.push_back(d);
      ++op.dep_count;
    }
    s_.steps = std::max(s_.steps, op.step + 1);
    s_.ops.push_back(op);
    return static_cast<int>(s_.ops.size()) - 1;
  }

  Schedule take() { return std::move(s_); }

 private:
  Schedule s_;
};

CommOp make_op(int src, int dst, Segment from, Segment to, bool reduce, int step, int algo_step, int chunk,
               int channel, int phase) {
  CommOp op;
  op.src = src;
  op.dst = dst;
  op.from = from;
  op.to = to;
  op.reduce = reduce;
  op.step = step;
  op.algo_step = algo_step;
  op.chunk = chunk;
  op.channel = channel;
  op.phase = phase;
  return op;
}

// Slice `p` of `slices` of a segment.
Segment slice_of(Segment seg, int slices, int p) {
  const Segment s = split_segment(seg.count_elems, slices, p);
  return {seg.offset_elems + s.offset_elems, s.count_elems};
}

void check_ring(const std::vector<int>& ring) {
  std::vector<int> sorted = ring;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < static_cast<int>(sorted.size()); ++i)
    DPS_ASSERT(sorted[i] == i, "ring order must be a permutation of 0..{}", ring.size() - 1);
}

int position_in(const std::vector<int>& ring, int rank) {
  return static_cast<int>(std::find(ring.begin(), ring.end(), rank) - ring.begin());
}

int ceil_log2(int n) {
  int k = 0;
  while ((1 << k) < n) ++k;
  return k;
}

}  // namespace

Segment split_segment(int64_t count, int parts, int index) {
  DPS_ASSERT(parts >= 1 && index >= 0 && index < parts, "split_segment({}, {}, {})", count, parts, index);
  const int64_t begin = count * index / parts;
  const int64_t end = count * (index + 1) / parts;
  return {begin, end - begin};
}

int pipeline_slices(int requested, uint64_t chunk_bytes) {
  if (requested > 0) return requested;
  const uint64_t slices = (chunk_bytes + kSliceBytes - 1) / kSliceBytes;
  return static_cast<int>(std::clamp<uint64_t>(slices, 1, kMaxSlices));
}

// ---------------------------------------------------------------------------------------- ring

Schedule ring_all_reduce(const std::vector<int>& ring, int64_t count, int slices) {
  check_ring(ring);
  const int n = static_cast<int>(ring.size());
  Builder b("ring", {"reduce-scatter", "all-gather"}, slices);
  if (n == 1) return b.take();
  const int stages = 2 * (n - 1);
  // op_at[(s * slices + p) * n + i]: the op sent by ring position i at stage s, slice p.
  std::vector<int> op_at(static_cast<size_t>(stages) * slices * n, -1);
  for (int s = 0; s < stages; ++s) {
    const bool scatter = s < n - 1;
    for (int p = 0; p < slices; ++p) {
      for (int i = 0; i < n; ++i) {
        // Reduce-scatter: position i forwards chunk (i - s), which it reduced at the previous
        // stage; after n-1 stages position i owns the complete chunk (i + 1). All-gather: it
        // forwards chunk (i + 1 - t), which it received at the previous stage.
        const int chunk = scatter ? mod(i - s, n) : mod(i + 1 - (s - (n - 1)), n);
        const Segment seg = slice_of(split_segment(count, n, chunk), slices, p);
        const int dep = s > 0 ? op_at[((s - 1) * slices + p) * n + mod(i - 1, n)] : -1;
        op_at[(s * slices + p) * n + i] = b.add(make_op(ring[i], ring[mod(i + 1, n)], seg, seg, scatter,
                                                        s + p, s, chunk * slices + p, 0, scatter ? 0 : 1),
                                                {dep});
      }
    }
  }
  return b.take();
}

Schedule ring_all_gather(const std::vector<int>& ring, int64_t block, int slices) {
  check_ring(ring);
  const int n = static_cast<int>(ring.size());
  Builder b("ring", {"all-gather"}, slices);
  std::vector<int> op_at(static_cast<size_t>(std::max(n - 1, 0)) * slices * n, -1);
  for (int s = 0; s < n - 1; ++s) {
    for (int p = 0; p < slices; ++p) {
      for (int i = 0; i < n; ++i) {
        // Position i forwards the block of the rank s positions before it (its own at stage 0).
        const int owner = ring[mod(i - s, n)];
        const Segment seg = slice_of({owner * block, block}, slices, p);
        const int dep = s > 0 ? op_at[((s - 1) * slices + p) * n + mod(i - 1, n)] : -1;
        op_at[(s * slices + p) * n + i] =
            b.add(make_op(ring[i], ring[mod(i + 1, n)], seg, seg, false, s + p, s, owner * slices + p, 0, 0),
                  {dep});
      }
    }
  }
  return b.take();
}

Schedule ring_reduce_scatter(const std::vector<int>& ring, int64_t block, int slices) {
  check_ring(ring);
  const int n = static_cast<int>(ring.size());
  Builder b("ring", {"reduce-scatter"}, slices);
  std::vector<int> op_at(static_cast<size_t>(std::max(n - 1, 0)) * slices * n, -1);
  for (int s = 0; s < n - 1; ++s) {
    for (int p = 0; p < slices; ++p) {
      for (int i = 0; i < n; ++i) {
        // Position i forwards the partial sum of the block owned by the rank s+1 positions
        // before it; after n-1 stages every position holds its own block, fully reduced.
        const int owner = ring[mod(i - s - 1, n)];
        const Segment seg = slice_of({owner * block, block}, slices, p);
        const int dep = s > 0 ? op_at[((s - 1) * slices + p) * n + mod(i - 1, n)] : -1;
        op_at[(s * slices + p) * n + i] = b.add(
            make_op(ring[i], ring[mod(i + 1, n)], seg, seg, true, s + p, s, owner * slices + p, 0, 0), {dep});
      }
    }
  }
  return b.take();
}

Schedule ring_broadcast(const std::vector<int>& ring, int root, int64_t count, int slices) {
  check_ring(ring);
  const int n = static_cast<int>(ring.size());
  Builder b("ring", {"broadcast"}, slices);
  const int start = position_in(ring, root);
  std::vector<int> prev(slices, -1);
  for (int j = 0; j + 1 < n; ++j) {  // chain hop j: from root + j to root + j + 1
    const int src = ring[mod(start + j, n)], dst = ring[mod(start + j + 1, n)];
    for (int p = 0; p < slices; ++p) {
      const Segment seg = slice_of({0, count}, slices, p);
      prev[p] = b.add(make_op(src, dst, seg, seg, false, j + p, j, p, 0, 0), {prev[p]});
    }
  }
  return b.take();
}

Schedule ring_reduce(const std::vector<int>& ring, int root, int64_t count, int slices) {
  check_ring(ring);
  const int n = static_cast<int>(ring.size());
  Builder b("ring", {"reduce"}, slices);
  const int start = position_in(ring, root);
  std::vector<int> prev(slices, -1);
  for (int j = 0; j + 1 < n; ++j) {  // chain hop j: towards the root, starting farthest away
    const int src = ring[mod(start + n - 1 - j, n)], dst = ring[mod(start + n - 2 - j, n)];
    for (int p = 0; p < slices; ++p) {
      const Segment seg = slice_of({0, count}, slices, p);
      prev[p] = b.add(make_op(src, dst, seg, seg, true, j + p, j, p, 0, 0), {prev[p]});
    }
  }
  return b.take();
}

// --------------------------------------------------------------------------------------- trees

Schedule tree_all_reduce(int ranks, int64_t count, int slices) {
  const int n = ranks;
  Builder b("tree", {"reduce", "broadcast"}, slices);
  if (n == 1) return b.take();
  // Heap shape shared by both trees: index i has parent (i-1)/2 and children 2i+1, 2i+2.
  std::vector<int> height(n, 0), depth(n, 0);
  for (int i = n - 1; i > 0; --i) height[(i - 1) / 2] = std::max(height[(i - 1) / 2], height[i] + 1);
  for (int i = 1; i < n; ++i) depth[i] = depth[(i - 1) / 2] + 1;
  const int tree_height = height[0];
  const int max_depth = *std::max_element(depth.begin(), depth.end());
  auto rank_at = [n](int tree, int index) { return tree == 0 ? index : n - 1 - index; };
  // up[(t * slices + p) * n + i]: the op that sent heap node i's partial result to its parent.
  std::vector<int> up(static_cast<size_t>(2) * slices * n, -1);
  std::vector<int> down(static_cast<size_t>(2) * slices * n, -1);
  for (int t = 0; t < 2; ++t) {
    const Segment half = split_segment(count, 2, t);
    for (int p = 0; p < slices; ++p) {
      const Segment seg = slice_of(half, slices, p);
      for (int h = 0; h < tree_height; ++h) {
        for (int i = 1; i < n; ++i) {
          if (height[i] != h) continue;
          const int c1 = 2 * i + 1, c2 = 2 * i + 2;
          const int d1 = c1 < n ? up[(t * slices + p) * n + c1] : -1;
          const int d2 = c2 < n ? up[(t * slices + p) * n + c2] : -1;
          up[(t * slices + p) * n + i] = b.add(make_op(rank_at(t, i), rank_at(t, (i - 1) / 2), seg, seg, true,
                                                       h + p, h, t * slices + p, 3 * t, 0),
                                               {d1, d2});
        }
      }
    }
  }
  for (int t = 0; t < 2; ++t) {
    const Segment half = split_segment(count, 2, t);
    for (int p = 0; p < slices; ++p) {
      const Segment seg = slice_of(half, slices, p);
      for (int d = 1; d <= max_depth; ++d) {
        for (int i = 1; i < n; ++i) {
          if (depth[i] != d) continue;
          const int parent = (i - 1) / 2;
          std::vector<int> deps;
          if (parent == 0) {  // the root's slice is final once both children's partials are in
            for (int c : {1, 2})
              if (c < n) deps.push_back(up[(t * slices + p) * n + c]);
          } else {
            deps.push_back(down[(t * slices + p) * n + parent]);
          }
          const int channel = 3 * t + 1 + (i % 2 == 0 ? 1 : 0);
          down[(t * slices + p) * n + i] =
              b.add(make_op(rank_at(t, parent), rank_at(t, i), seg, seg, false, tree_height + p + d,
                            tree_height + d - 1, t * slices + p, channel, 1),
                    deps);
        }
      }
    }
  }
  return b.take();
}

Schedule tree_broadcast(int ranks, int root, int64_t count) {
  const int n = ranks;
  Builder b("tree", {"broadcast"}, 1);
  std::vector<int> received(n, -1);  // by relative rank: the op that delivered the data
  const Segment all{0, count};
  for (int k = 0; k < ceil_log2(n); ++k) {
    for (int v = 0; v < (1 << k); ++v) {
      const int to = v + (1 << k);
      if (to >= n) continue;
      received[to] =
          b.add(make_op((root + v) % n, (root + to) % n, all, all, false, k, k, 0, 0, 0), {received[v]});
    }
  }
  return b.take();
}

Schedule tree_reduce(int ranks, int root, int64_t count) {
  const int n = ranks;
  Builder b("tree", {"reduce"}, 1);
  std::vector<std::vector<int>> into(n);  // by relative rank: ops reduced into it so far
  const Segment all{0, count};
  for (int k = 0; k < ceil_log2(n); ++k) {
    for (int v = 1 << k; v < n; v += 1 << (k + 1)) {
      const int to = v - (1 << k);
      into[to].push_back(
          b.add(make_op((root + v) % n, (root + to) % n, all, all, true, k, k, 0, 0, 0), into[v]));
    }
  }
  return b.take();
}

// --------------------------------------------------------------------------------------- naive

Schedule naive_all_reduce(int ranks, int64_t count) {
  Builder b("naive", {"reduce", "broadcast"}, 1);
  const Segment all{0, count};
  std::vector<int> gathered;
  for (int r = 1; r < ranks; ++r) gathered.push_back(b.add(make_op(r, 0, all, all, true, 0, 0, 0, 0, 0), {}));
  for (int r = 1; r < ranks; ++r) b.add(make_op(0, r, all, all, false, 1, 1, 0, r, 1), gathered);
  return b.take();
}

Schedule naive_broadcast(int ranks, int root, int64_t count) {
  Builder b("naive", {"broadcast"}, 1);
  const Segment all{0, count};
  for (int r = 0; r < ranks; ++r)
    if (r != root) b.add(make_op(root, r, all, all, false, 0, 0, 0, r, 0), {});
  return b.take();
}

Schedule naive_reduce(int ranks, int root, int64_t count) {
  Builder b("naive", {"reduce"}, 1);
  const Segment all{0, count};
  for (int r = 0; r < ranks; ++r)
    if (r != root) b.add(make_op(r, root, all, all, true, 0, 0, 0, 0, 0), {});
  return b.take();
}

Schedule naive_scatter(int ranks, int root, int64_t block) {
  Builder b("naive", {"scatter"}, 1);
  for (int r = 0; r < ranks; ++r)
    if (r != root) b.add(make_op(root, r, {r * block, block}, {0, block}, false, 0, 0, r, r, 0), {});
  return b.take();
}

Schedule naive_gather(int ranks, int root, int64_t block) {
  Builder b("naive", {"gather"}, 1);
  for (int r = 0; r < ranks; ++r)
    if (r != root) b.add(make_op(r, root, {0, block}, {r * block, block}, false, 0, 0, r, 0, 0), {});
  return b.take();
}

// ---------------------------------------------------------------------------------- all_to_all

Schedule pairwise_all_to_all(int ranks, int64_t block) {
  const int n = ranks;
  Builder b("pairwise", {"all-to-all"}, 1);
  // No dependencies: every block is in place from the start. One channel per rank, so a rank's
  // sends leave one round after another, as the n-1 rounds of the exchange.
  for (int k = 1; k < n; ++k)
    for (int r = 0; r < n; ++r) {
      const int dst = (r + k) % n;
      b.add(make_op(r, dst, {dst * block, block}, {(n + r) * block, block}, false, k - 1, k - 1, r, 0, 0),
            {});
    }
  return b.take();
}

// ------------------------------------------------------------------------------------- barrier

Schedule dissemination_barrier(int ranks) {
  const int n = ranks;
  Builder b("dissemination", {"barrier"}, 1);
  std::vector<int> last_into(n, -1);
  for (int k = 0; k < ceil_log2(n); ++k) {
    std::vector<int> next(n, -1);
    for (int r = 0; r < n; ++r) {
      CommOp op = make_op(r, (r + (1 << k)) % n, {}, {}, false, k, k, 0, 0, 0);
      op.signal = true;
      next[op.dst] = b.add(op, {last_into[r]});
    }
    last_into = next;
  }
  return b.take();
}

}  // namespace dpscope
