// RunErrors (replay/run_errors.hpp): the `error` instants of a failed run, in time order.
#include "replay/run_errors.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace dpscope::viz {

RunErrors RunErrors::from_trace(const trace::TraceData& data, const TimeOrder& order) {
  RunErrors errors;
  std::vector<uint32_t> found;
  for (uint32_t i = 0; i < order.size(); ++i)
    if (data.events[i].type == trace::EventType::kInstant && data.events[i].known == trace::EventName::kError)
      found.push_back(i);
  // Time order, ties by rank: ranks that stop at the same moment (every rank learns of a mismatch
  // when the last one arrives) write their errors in whatever order their threads get to the
  // file, and the banner must not name a different rank on every run.
  std::sort(found.begin(), found.end(), [&](uint32_t a, uint32_t b) {
    const trace::Event& ea = data.events[a];
    const trace::Event& eb = data.events[b];
    return ea.ts_ns != eb.ts_ns ? ea.ts_ns < eb.ts_ns : ea.rank != eb.rank ? ea.rank < eb.rank : a < b;
  });
  for (const uint32_t i : found) {
    const uint32_t pos = order.position_of(i);
    const trace::Event& e = data.events[i];
    const std::optional<RunError> error = data.run_error(e);
    errors.marks.push_back({.event = i,
                            .ts_ns = e.ts_ns,
                            .rank = e.rank,
                            .step = e.step,
                            .message = error ? std::string(error->message) : std::string()});
    errors.positions.push_back(pos);
  }
  return errors;
}

size_t RunErrors::happened(Cursor cursor) const {
  // Marks are few (one per failing rank): a count, as ties by rank need not follow positions.
  return static_cast<size_t>(
      std::count_if(positions.begin(), positions.end(), [&](uint32_t pos) { return pos < cursor.seq; }));
}

std::vector<int32_t> RunErrors::stopped_ranks(Cursor cursor) const {
  std::vector<int32_t> ranks;
  for (size_t i = 0; i < marks.size(); ++i)
    if (positions[i] < cursor.seq && std::find(ranks.begin(), ranks.end(), marks[i].rank) == ranks.end())
      ranks.push_back(marks[i].rank);
  return ranks;
}

const RunErrorMark* RunErrors::first_happened(Cursor cursor) const {
  for (size_t i = 0; i < marks.size(); ++i)
    if (positions[i] < cursor.seq) return &marks[i];
  return nullptr;
}

std::vector<int32_t> RunErrors::running_ranks(Cursor cursor) const {
  const std::vector<int32_t> stopped = stopped_ranks(cursor);
  std::vector<int32_t> running;
  for (size_t i = 0; i < marks.size(); ++i)
    if (positions[i] >= cursor.seq &&
        std::find(stopped.begin(), stopped.end(), marks[i].rank) == stopped.end() &&
        std::find(running.begin(), running.end(), marks[i].rank) == running.end())
      running.push_back(marks[i].rank);
  std::sort(running.begin(), running.end());
  return running;
}

RunErrorText run_error_text(const RunErrorMark& first, const std::vector<int32_t>& stopped,
                            const std::vector<int32_t>& running) {
  RunErrorText text = run_error_text(first, stopped.size());
  if (running.empty()) return text;
  // Not every rank has stopped: the run has not failed yet, whatever is coming.
  text.run_failed = false;
  const std::string who = stopped.size() == 1 ? fmt::format("Rank {}", first.rank) : [&] {
    std::vector<int32_t> sorted = stopped;
    std::sort(sorted.begin(), sorted.end());
    std::string ranks = rank_list_label(sorted);
    ranks[0] = 'R';
    return ranks;
  }();
  const std::string where =
      first.step >= 0 ? fmt::format("at step {}", shown_count(first.step)) : std::string("before training");
  text.headline = fmt::format("{} stopped {} ({} still running)", who, where, rank_list_label(running));
  return text;
}

RunErrorText run_error_text(const RunErrorMark& first, size_t ranks_stopped) {
  RunErrorText text;
  text.headline = first.step >= 0 ? fmt::format("Run failed: rank {} stopped at step {}", first.rank,
                                                shown_count(first.step))
                                  : fmt::format("Run failed: rank {} stopped before training", first.rank);
  if (ranks_stopped > 1) text.headline += fmt::format(" ({} ranks stopped)", ranks_stopped);
  text.reason = first.message.empty() ? "(the trace gives no reason)" : first.message;
  // spawn() prefixes "rank N failed: " when it rethrows; a rank's own event has the bare reason.
  if (const size_t colon = text.reason.find(" failed: "); text.reason.starts_with("rank ") && colon < 12)
    text.reason = text.reason.substr(colon + 9);
  return text;
}

}  // namespace dpscope::viz
