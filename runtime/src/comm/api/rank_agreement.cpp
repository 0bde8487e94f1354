// agree_on_settings() and run_as_rank() (comm/rank_agreement.hpp).
#include "dpscope/comm/rank_agreement.hpp"

#include <algorithm>
#include <optional>

#include "dpscope/base/termination_notice.hpp"

namespace dpscope {
namespace {

// Settings travel as "flag\x1fvalue\x1e..." bytes, one int64 element per byte (collectives carry
// float32 and int64 tensors).
constexpr char kFieldEnd = '\x1f';
constexpr char kSettingEnd = '\x1e';

std::string encode(const std::vector<RunSetting>& settings) {
  std::string text;
  for (const RunSetting& s : settings) text += s.flag + kFieldEnd + s.value + kSettingEnd;
  return text;
}

std::vector<RunSetting> decode(const std::string& text) {
  std::vector<RunSetting> settings;
  size_t begin = 0;
  for (size_t end; (end = text.find(kSettingEnd, begin)) != std::string::npos; begin = end + 1) {
    const std::string one = text.substr(begin, end - begin);
    const size_t mid = one.find(kFieldEnd);
    if (mid == std::string::npos) continue;
    settings.push_back({one.substr(0, mid), one.substr(mid + 1)});
  }
  return settings;
}

std::optional<std::string> value_of(const std::vector<RunSetting>& settings, const std::string& flag) {
  for (const RunSetting& s : settings)
    if (s.flag == flag) return s.value.empty() ? std::nullopt : std::optional<std::string>(s.value);
  return std::nullopt;
}

// "" when `mine` equals `rank0`, else the first flag that differs and both values.
std::string first_difference(const std::vector<RunSetting>& mine, const std::vector<RunSetting>& rank0) {
  std::vector<std::string> flags;
  for (const auto* list : {&mine, &rank0})
    for (const RunSetting& s : *list)
      if (std::find(flags.begin(), flags.end(), s.flag) == flags.end()) flags.push_back(s.flag);
  for (const std::string& flag : flags) {
    const std::optional<std::string> here = value_of(mine, flag);
    const std::optional<std::string> there = value_of(rank0, flag);
    if (here != there)
      return fmt::format("{} is {} here but {} on rank 0", flag, here.value_or("unset"),
                         there.value_or("unset"));
  }
  return "";
}

}  // namespace

// Its collectives name Algorithm::kAuto: ranks whose default algorithm differs ($DPSCOPE_ALGO, one of
// the settings agree_on_settings() compares) still run the same ones, so the difference is named like
// any other.
std::string broadcast_text(ProcessGroup& group, int root, const std::string& text) {
  const Device& dev = group.device();
  const int64_t own_count = std::min(static_cast<int64_t>(text.size()), kMaxBroadcastTextBytes);
  Tensor length = Tensor::from_ints(std::vector<int64_t>{own_count}, {1}, dev, MemoryCategory::kBuffers);
  group.broadcast(length, {.root = root, .algorithm = Algorithm::kAuto})->wait();
  const int64_t count = length.to_ints()[0];
  DPS_CHECK(count >= 0 && count <= kMaxBroadcastTextBytes, ErrorKind::kMismatch,
            "rank {} of {}: rank {} sent a text of {} bytes, more than the {} a rank sends (is it another "
            "program?)",
            group.rank(), group.size(), root, count, kMaxBroadcastTextBytes);
  std::vector<int64_t> bytes(static_cast<size_t>(count));  // [count]
  if (group.rank() == root)
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(text[i]);
  Tensor payload = Tensor::from_ints(bytes, {count}, dev, MemoryCategory::kBuffers);
  if (count > 0) group.broadcast(payload, {.root = root, .algorithm = Algorithm::kAuto})->wait();
  std::string received;
  for (int64_t b : payload.to_ints()) received.push_back(static_cast<char>(b));
  return received;
}

void agree_on_settings(ProcessGroup& group, const std::vector<RunSetting>& settings) {
  const std::string mine = encode(settings);
  const std::string rank0 = broadcast_text(group, 0, mine);
  const std::string difference = rank0 == mine ? "" : first_difference(settings, decode(rank0));
  const bool differs = rank0 != mine;
  // The highest differing rank + 1 (0: all agree), on every rank.
  Tensor verdict = Tensor::from_ints(std::vector<int64_t>{differs ? group.rank() + 1 : 0}, {1},
                                     group.device(), MemoryCategory::kBuffers);
  group.all_reduce(verdict, {.op = ReduceOp::kMax, .algorithm = Algorithm::kAuto})->wait();
  DPS_CHECK(!differs, ErrorKind::kMismatch,
            "rank {} of {} runs another configuration than rank 0: {} (every rank must be started with the "
            "same flags)",
            group.rank(), group.size(), difference.empty() ? "the flags are in another order" : difference);
  const int64_t differing = verdict.to_ints()[0] - 1;
  DPS_CHECK(differing < 0, ErrorKind::kMismatch,
            "rank {} runs another configuration than rank 0 (its error names the flag): every rank must be "
            "started with the same flags",
            differing);
}

void run_as_rank(ProcessGroup& group, const std::function<void()>& work) {
  try {
    work();
  } catch (const Error& e) {
    own_error_on_termination(e.what());  // before the peers hear of it (base/termination_notice.hpp)
    group.backend().abort(e.kind(), e.what());
    throw;
  } catch (const std::exception& e) {
    own_error_on_termination(e.what());
    group.backend().abort(ErrorKind::kInternal, e.what());
    throw;
  }
  group.backend().rank_finished();
}

}  // namespace dpscope
