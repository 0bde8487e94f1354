// The collectives index (ReplayModel::build_collectives) and the chunk view of a state
// (ReplayModel::fill_chunks): which ranks' contributions each chunk holds on each GPU.
//
// The chunk view replays a collective's transfers up to the cursor. Every member starts with its
// own contribution (reductions: in every chunk; copies such as all-gather: in the chunks it sends
// before it receives them). A transfer takes what its source held when it started; on arrival a
// reducing transfer ("ring reduce-scatter", "tree reduce") adds that to the destination's chunk,
// and a copying one ("all-gather", "broadcast") replaces it. Nothing here knows the ring: a tree or
// naive schedule replays the same way, from the transfers the runtime traced.
#include <algorithm>
#include <bit>
#include <unordered_map>

#include <fmt/format.h>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

namespace {

// Members beyond this many have no bit of their own: such collectives get no chunk view.
constexpr size_t kMaxMembers = 64;

uint64_t all_members(size_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace

bool ChunkSnapshot::complete() const {
  const uint64_t all = all_members(members.size());
  return !held.empty() &&
         std::all_of(held.begin(), held.end(), [&](uint64_t h) { return reduction ? h == all : h != 0; });
}

void ReplayModel::build_collectives() {
  const trace::TraceData& data = *data_;
  // Whether a transfer's name says it reduces, once per distinct name.
  std::unordered_map<uint32_t, bool> reducing;
  auto reduces = [&](uint32_t name) {
    auto [it, inserted] = reducing.try_emplace(name, false);
    if (inserted) it->second = data.str(name).find("reduce") != std::string_view::npos;
    return it->second;
  };
  for (uint32_t p = 0; p < order_.size(); ++p) {
    const uint32_t index = order_.event_at(p);
    const trace::Event& e = data.events[index];
    const trace::Transfer& tr = data.transfer(e);
    if (e.type != trace::EventType::kTransfer || tr.coll < 0) continue;
    auto [it, inserted] = collective_index_.try_emplace(tr.coll, collectives_.size());
    if (inserted) {
      Collective c;
      c.id = tr.coll;
      c.begin_ns = e.ts_ns;
      c.step = e.step;
      c.phase = e.phase;
      collectives_.push_back(std::move(c));
    }
    Collective& c = collectives_[it->second];
    c.transfers.push_back(index);
    c.reduces.push_back(reduces(e.name) ? 1 : 0);
    c.end_ns = std::max(c.end_ns, e.end_ns());
    c.trace_chunks = std::max(c.trace_chunks, tr.chunk + 1);
    if (tr.algo_step >= 0) {
      c.first_algo_step = c.first_algo_step < 0 ? tr.algo_step : std::min(c.first_algo_step, tr.algo_step);
      c.last_algo_step = std::max(c.last_algo_step, tr.algo_step);
    }
    for (int32_t id : {tr.src, tr.dst}) {
      const int d = device_index(id);
      if (d >= 0 && std::find(c.members.begin(), c.members.end(), d) == c.members.end())
        c.members.push_back(d);
    }
  }
  // Slices and DDP's division by N come from spans that name the collective.
  for (const trace::Event& e : data.events) {
    if (e.type != trace::EventType::kSpan) continue;
    const bool avg = e.known == EventName::kAvgScale;
    if (!avg && e.category != SpanCategory::kCollective) continue;
    const std::optional<double> coll = data.arg(e, "coll");
    if (!coll) continue;
    const auto it = collective_index_.find(static_cast<int64_t>(*coll));
    if (it == collective_index_.end()) continue;
    Collective& c = collectives_[it->second];
    if (avg) {
      if (const int d = device_index(e.dev); d >= 0)
        c.avg_scales.emplace_back(d, static_cast<uint32_t>(&e - data.events.data()));
    } else {
      if (const std::optional<double> slices = data.arg(e, "slices"); slices && *slices >= 1)
        c.slices = static_cast<int>(*slices);
      // "all_reduce ring 3.07 MiB": the operation is the first word.
      if (c.op.empty()) {
        std::string op(data.str(e.name).substr(0, data.str(e.name).find(' ')));
        std::replace(op.begin(), op.end(), '_', '-');
        c.op = op;
      }
    }
  }
  device_collectives_.assign(devices_.size(), {});
  for (uint32_t i = 0; i < collectives_.size(); ++i) {
    Collective& c = collectives_[i];
    std::stable_sort(c.members.begin(), c.members.end(),
                     [&](int32_t a, int32_t b) { return devices_[a].rank < devices_[b].rank; });
    for (int32_t d : c.members) device_collectives_[d].push_back(i);
  }
}

std::pair<int32_t, int32_t> ReplayModel::algo_step_range(int64_t coll) const {
  const Collective* c = collective(coll);
  return c == nullptr ? std::pair<int32_t, int32_t>{-1, -1}
                      : std::pair{c->first_algo_step, c->last_algo_step};
}

const Collective* ReplayModel::collective(int64_t coll) const {
  const auto it = collective_index_.find(coll);
  return it == collective_index_.end() ? nullptr : &collectives_[it->second];
}

void ReplayModel::fill_chunks(ReplayState& s, Cursor cur) const {
  // Per collective shown: each member's mask per trace chunk, replayed once for all its members.
  std::unordered_map<size_t, std::vector<std::vector<uint64_t>>> replayed;
  auto replay = [&](size_t index) -> const std::vector<std::vector<uint64_t>>& {
    auto [it, inserted] = replayed.try_emplace(index);
    if (!inserted) return it->second;
    const Collective& c = collectives_[index];
    const size_t n = c.members.size();
    const size_t chunks = static_cast<size_t>(c.trace_chunks);
    auto member_of = [&](int32_t id) {
      const int d = device_index(id);
      return static_cast<int>(std::find(c.members.begin(), c.members.end(), d) - c.members.begin());
    };
    std::vector<std::vector<uint64_t>>& held = it->second;
    held.assign(n, std::vector<uint64_t>(chunks, 0));
    const bool reduction = !c.reduces.empty() && c.reduces.front() != 0;
    if (reduction) {
      for (size_t m = 0; m < n; ++m) std::fill(held[m].begin(), held[m].end(), uint64_t{1} << m);
    } else {
      // A copy-only collective: a member owns the chunks it sends before it ever receives them.
      std::vector<std::vector<uint8_t>> seen(n, std::vector<uint8_t>(chunks, 0));
      for (uint32_t t : c.transfers) {
        const trace::Event& e = data_->events[t];
        const trace::Transfer& tr = data_->transfer(e);
        if (tr.chunk < 0) continue;
        const int src = member_of(tr.src);
        const int dst = member_of(tr.dst);
        if (!seen[src][tr.chunk]) held[src][tr.chunk] = uint64_t{1} << src;
        seen[src][tr.chunk] = seen[dst][tr.chunk] = 1;
      }
    }
    // Starts and arrivals in time order (an arrival before a start at the same time: a ring step
    // forwards what the previous one delivered).
    struct Moment {
      int64_t t_ns;
      bool start;
      size_t transfer;
    };
    std::vector<Moment> moments;
    for (size_t k = 0; k < c.transfers.size(); ++k) {
      const trace::Event& e = data_->events[c.transfers[k]];
      const trace::Transfer& tr = data_->transfer(e);
      if (tr.chunk < 0 || !applied(c.transfers[k], cur)) continue;
      moments.push_back({e.ts_ns, true, k});
      if (e.end_ns() <= cur.t_ns) moments.push_back({e.end_ns(), false, k});
    }
    std::stable_sort(moments.begin(), moments.end(), [](const Moment& a, const Moment& b) {
      return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : (!a.start && b.start);
    });
    std::vector<uint64_t> carried(c.transfers.size(), 0);
    for (const Moment& m : moments) {
      const trace::Event& e = data_->events[c.transfers[m.transfer]];
      const trace::Transfer& tr = data_->transfer(e);
      const int src = member_of(tr.src);
      const int dst = member_of(tr.dst);
      if (m.start) {
        carried[m.transfer] = held[src][tr.chunk];
      } else if (c.reduces[m.transfer] != 0) {
        held[dst][tr.chunk] |= carried[m.transfer];
      } else {
        held[dst][tr.chunk] = carried[m.transfer];
      }
    }
    return held;
  };

  for (size_t d = 0; d < devices_.size(); ++d) {
    const std::vector<uint32_t>& mine = device_collectives_[d];
    // The latest collective of this device that has started.
    auto started = std::partition_point(mine.begin(), mine.end(), [&](uint32_t i) {
      return applied(collectives_[i].transfers.front(), cur);
    });
    if (started == mine.begin()) continue;
    const size_t index = *(started - 1);
    const Collective& c = collectives_[index];
    DeviceSnapshot& ds = s.devices[d];
    // Shown while it runs, and afterwards until the device moves on to another step or phase.
    const bool running = c.end_ns > cur.t_ns;
    if (!running && (ds.step != c.step || ds.phase != c.phase)) continue;
    if (c.members.size() > kMaxMembers || c.trace_chunks <= 0) continue;
    const std::vector<std::vector<uint64_t>>& held = replay(index);
    const size_t me =
        static_cast<size_t>(std::find(c.members.begin(), c.members.end(), d) - c.members.begin());
    ChunkSnapshot& out = ds.chunks;
    out.coll = c.id;
    out.members = c.members;
    out.reduction = !c.reduces.empty() && c.reduces.front() != 0;
    out.exchange = c.op == "all-to-all";
    // A data chunk holds what all of its pipeline slices hold.
    out.held.assign(static_cast<size_t>(c.data_chunks()), all_members(c.members.size()));
    for (int ch = 0; ch < c.trace_chunks; ++ch) out.held[static_cast<size_t>(ch / c.slices)] &= held[me][ch];
    // The stage: while the collective runs, the latest transfer of this device that has started.
    if (!running) {
      out.stage = fmt::format("{}{}{}", c.op, c.op.empty() ? "" : " ", out.complete() ? "complete" : "done");
    } else {
      out.stage = "waiting for its first transfer";
      for (size_t k = c.transfers.size(); k-- > 0;) {
        const trace::Event& e = data_->events[c.transfers[k]];
        const trace::Transfer& tr = data_->transfer(e);
        if (!applied(c.transfers[k], cur) ||
            (device_index(tr.src) != static_cast<int>(d) && device_index(tr.dst) != static_cast<int>(d)))
          continue;
        std::string_view name = data_->str(e.name);
        if (const size_t space = name.find(' '); space != std::string_view::npos)
          name.remove_prefix(space + 1);
        out.stage = tr.algo_step >= 0 && c.first_algo_step >= 0
                        ? fmt::format("{} step {}/{}", name, tr.algo_step - c.first_algo_step + 1,
                                      c.last_algo_step - c.first_algo_step + 1)
                        : std::string(name);
        break;
      }
    }
    for (const auto& [device, event] : c.avg_scales) {
      if (device != static_cast<int32_t>(d) || !applied(event, cur)) continue;
      const trace::Event& e = data_->events[event];
      if (e.end_ns() > cur.t_ns) continue;
      out.averaged = true;
      out.divisor =
          static_cast<int>(data_->arg(e, "divisor").value_or(static_cast<double>(c.members.size())));
    }
  }
}

}  // namespace dpscope::viz
