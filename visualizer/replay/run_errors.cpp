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
  // Positions in time order are unique, so sorting by them is the time order, ties in file order.
  std::vector<uint32_t> positions(found.size());
  for (size_t k = 0; k < found.size(); ++k) positions[k] = order.position_of(found[k]);
  std::sort(positions.begin(), positions.end());
  for (const uint32_t pos : positions) {
    const uint32_t i = order.event_at(pos);
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
  return static_cast<size_t>(std::lower_bound(positions.begin(), positions.end(), cursor.seq) -
                             positions.begin());
}

std::vector<int32_t> RunErrors::stopped_ranks(Cursor cursor) const {
  std::vector<int32_t> ranks;
  const size_t n = happened(cursor);
  for (size_t i = 0; i < n; ++i)
    if (std::find(ranks.begin(), ranks.end(), marks[i].rank) == ranks.end()) ranks.push_back(marks[i].rank);
  return ranks;
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
