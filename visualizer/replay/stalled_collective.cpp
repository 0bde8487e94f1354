// Collectives that end in an error instead of running (ReplayModel::build_failed_collectives,
// fill_stalled): the runtime traces each member's call as a `collective` span with `args.error`,
// from its arrival to the moment the last member arrived and the check failed
// (docs/trace-format.md). Between those moments a member waits for the ranks that have not called
// yet; the state names them, so the stage card of lesson 13's rank 0 reads "all_reduce: waiting
// for ranks 1-3" while ranks 1-3 run the next step's forward and backward.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "replay/replay_model.hpp"

namespace dpscope::viz {

std::string rank_list_label(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "";
  if (ranks.size() == 1) return fmt::format("rank {}", ranks.front());
  bool consecutive = true;
  for (size_t i = 1; i < ranks.size(); ++i) consecutive = consecutive && ranks[i] == ranks[i - 1] + 1;
  if (consecutive && ranks.size() > 2) return fmt::format("ranks {}-{}", ranks.front(), ranks.back());
  return fmt::format("ranks {}", fmt::join(ranks, ", "));
}

void ReplayModel::build_failed_collectives() {
  const trace::TraceData& data = *data_;
  for (uint32_t i = 0; i < data.events.size(); ++i) {
    const trace::Event& e = data.events[i];
    if (!data.collective_error(e)) continue;
    failed_collectives_.push_back({.event = i,
                                   .rank = e.rank,
                                   .group = static_cast<int64_t>(data.arg(e, "group").value_or(0)),
                                   .coll = static_cast<int64_t>(data.arg(e, "coll").value_or(-1))});
  }
}

void ReplayModel::fill_stalled(ReplayState& s, Cursor c) const {
  if (failed_collectives_.empty()) return;
  const trace::TraceData& data = *data_;
  for (DeviceSnapshot& ds : s.devices) {
    for (StreamActivity& act : ds.activity) {
      if (act.event == kNoEvent) continue;
      const auto self = std::find_if(failed_collectives_.begin(), failed_collectives_.end(),
                                     [&](const FailedCollective& f) { return f.event == act.event; });
      if (self == failed_collectives_.end()) continue;
      const trace::Event& e = data.events[act.event];
      StalledCollective& st = ds.stalled;
      st.event = act.event;
      st.coll = self->coll;
      st.op = std::string(data.text_arg(e, "op").value_or("collective"));
      st.error = std::string(data.collective_error(e).value_or(""));
      for (const FailedCollective& peer : failed_collectives_)
        if (peer.group == self->group && peer.coll == self->coll && !applied(peer.event, c))
          st.waiting_for.push_back(peer.rank);
      std::sort(st.waiting_for.begin(), st.waiting_for.end());
      // What the card's comm row says: who it waits for, then (once all are there) that it failed.
      act.text = st.waiting_for.empty()
                     ? fmt::format("{}: failed, the calls differ", st.op)
                     : fmt::format("{}: waiting for {}", st.op, rank_list_label(st.waiting_for));
    }
  }
}

}  // namespace dpscope::viz
