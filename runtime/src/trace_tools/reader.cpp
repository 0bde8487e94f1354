// The TraceData lookups (reader.hpp). Reading lives beside: trace_parser.cpp parses lines,
// trace_file.cpp reads a file, rank_traces.cpp a directory of rank files, and trace_path.cpp
// opens a path as either (read_trace, TraceFollower).
#include "dpscope/trace_tools/reader.hpp"

#include <cstring>
#include <limits>

#include "dpscope/base/error.hpp"

namespace dpscope::trace {

std::string_view TraceData::str(uint32_t index) const {
  return index < strings.size() ? std::string_view(strings[index]) : std::string_view();
}

uint32_t TraceData::find_string(std::string_view s) const {
  const auto it = string_index.find(std::string(s));
  return it == string_index.end() ? kNoString : it->second;
}

ArgValues TraceData::arg_values(const Args& a) const {
  if (a.shape >= shapes.size()) return {};
  const std::vector<uint32_t>& keys = shapes[a.shape].number_keys;
  if (a.begin + uint64_t{keys.size()} > value_pool.size()) return {};
  return {keys.data(), value_pool.data() + a.begin, keys.size()};
}

ArgTexts TraceData::arg_texts(const Args& a) const {
  if (a.shape >= shapes.size()) return {};
  const ArgShape& shape = shapes[a.shape];
  const uint64_t begin = a.begin + uint64_t{shape.number_keys.size()};
  if (begin + shape.text_keys.size() > value_pool.size()) return {};
  return {shape.text_keys.data(), value_pool.data() + begin, shape.text_keys.size()};
}

Args TraceData::add_args(std::span<const ArgValue> numbers, std::span<const ArgText> texts) {
  // Reused between calls: the shape of nearly every event is one already seen.
  thread_local ArgShape shape;
  thread_local std::vector<double> entries;
  shape.number_keys.clear();
  shape.text_keys.clear();
  entries.clear();
  for (const auto& [key, value] : numbers) {
    shape.number_keys.push_back(key);
    entries.push_back(value);
  }
  for (const auto& [key, text] : texts) {
    shape.text_keys.push_back(key);
    entries.push_back(text);  // a string index, exact as a double
  }
  return {.shape = intern_shape(shape), .begin = add_entries(entries)};
}

uint32_t TraceData::add_entries(std::span<const double> entries) {
  // 64Ki slots: a training trace repeats a few thousand distinct runs of entries (each kernel's
  // flops and bytes, each memory state) over and over.
  constexpr size_t kSlots = size_t{1} << 16;
  if (entries.empty()) return 0;  // any begin holds an empty run
  // The entries' bits mixed (a multiply moves low bits up, the shifts bring high ones down: whole
  // numbers as doubles differ only in their high bits).
  uint64_t hash = 0;
  for (const double v : entries) {
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    hash = (hash ^ bits) * 0x9E3779B97F4A7C15ull;
    hash ^= hash >> 32;
  }
  hash ^= hash >> 33;
  hash *= 0xFF51AFD7ED558CCDull;
  hash ^= hash >> 33;
  if (recent_entries.empty()) recent_entries.assign(kSlots, 0);
  uint32_t& slot = recent_entries[hash & (kSlots - 1)];
  if (slot != 0) {
    const size_t begin = slot - 1;
    if (begin + entries.size() <= value_pool.size() &&
        std::memcmp(value_pool.data() + begin, entries.data(), entries.size_bytes()) == 0)
      return static_cast<uint32_t>(begin);
  }
  DPS_CHECK(value_pool.size() + entries.size() < std::numeric_limits<uint32_t>::max(), ErrorKind::kFormat,
            "{}: more than 2^32 args or counter values", path);
  const auto begin = static_cast<uint32_t>(value_pool.size());
  value_pool.insert(value_pool.end(), entries.begin(), entries.end());
  slot = begin + 1;
  return begin;
}

uint32_t TraceData::intern_shape(const ArgShape& shape) {
  // The key: number keys, a separator no key index equals, then text keys, as bytes.
  thread_local std::string key;
  key.clear();
  const auto put = [&](uint32_t k) { key.append(reinterpret_cast<const char*>(&k), sizeof k); };
  for (uint32_t k : shape.number_keys) put(k);
  put(kNoString);
  for (uint32_t k : shape.text_keys) put(k);
  if (const auto it = shape_index.find(key); it != shape_index.end()) return it->second;
  const auto index = static_cast<uint32_t>(shapes.size());
  shape_index.emplace(key, index);
  shapes.push_back(shape);
  return index;
}

const Transfer& TraceData::transfer(const Event& e) const {
  static const Transfer kNone;
  if (e.type != EventType::kTransfer || e.payload < 0 || static_cast<size_t>(e.payload) >= transfers.size())
    return kNone;
  return transfers[static_cast<size_t>(e.payload)];
}

uint32_t TraceData::intern(std::string_view s) {
  auto [it, inserted] = string_index.try_emplace(std::string(s), static_cast<uint32_t>(strings.size()));
  if (inserted) strings.emplace_back(s);
  return it->second;
}

std::optional<double> TraceData::arg(const Event& e, std::string_view key) const {
  if ((e.type != EventType::kSpan && e.type != EventType::kInstant) || e.payload < 0 ||
      static_cast<size_t>(e.payload) >= args.size()) {
    return std::nullopt;
  }
  const uint32_t k = find_string(key);
  if (k == kNoString) return std::nullopt;
  for (const auto& [key_index, value] : arg_values(args[e.payload]))
    if (key_index == k) return value;
  return std::nullopt;
}

std::optional<std::string_view> TraceData::text_arg(const Event& e, std::string_view key) const {
  if ((e.type != EventType::kSpan && e.type != EventType::kInstant) || e.payload < 0 ||
      static_cast<size_t>(e.payload) >= args.size()) {
    return std::nullopt;
  }
  const uint32_t k = find_string(key);
  if (k == kNoString) return std::nullopt;
  for (const auto& [key_index, text] : arg_texts(args[e.payload]))
    if (key_index == k) return str(text);
  return std::nullopt;
}

std::optional<RunError> TraceData::run_error(const Event& e) const {
  if (e.type != EventType::kInstant || e.known != EventName::kError) return std::nullopt;
  return RunError{.message = text_arg(e, trace_key::kMessage).value_or("")};
}

std::optional<std::string_view> TraceData::collective_error(const Event& e) const {
  if (e.type != EventType::kSpan || e.category != SpanCategory::kCollective) return std::nullopt;
  return text_arg(e, trace_key::kError);
}

std::optional<GradReady> TraceData::grad_ready(const Event& e) const {
  if (e.type != EventType::kInstant || e.known != EventName::kGradReady) return std::nullopt;
  const std::optional<double> param = arg(e, trace_key::kParam);
  if (!param) return std::nullopt;
  return GradReady{.param = static_cast<int>(*param)};
}

std::optional<BucketArgs> TraceData::bucket_args(const Event& e) const {
  if (e.type != EventType::kInstant ||
      (e.known != EventName::kBucketLaunched && e.known != EventName::kBucketDone))
    return std::nullopt;
  const std::optional<double> bucket = arg(e, trace_key::kBucket);
  if (!bucket) return std::nullopt;
  return BucketArgs{.bucket = static_cast<int>(*bucket),
                    .bytes = static_cast<uint64_t>(arg(e, trace_key::kBytes).value_or(0.0)),
                    .params = static_cast<uint64_t>(arg(e, trace_key::kParams).value_or(0.0))};
}

std::optional<KernelArgs> TraceData::kernel_args(const Event& e) const {
  if (e.type != EventType::kSpan) return std::nullopt;
  const std::optional<double> flops = arg(e, trace_key::kFlops);
  const std::optional<double> bytes = arg(e, trace_key::kBytes);
  if (!flops || !bytes) return std::nullopt;
  return KernelArgs{.flops = *flops, .bytes = *bytes};
}

const RemoteEnds* TraceData::remote_ends_of(const Event& e) const {
  const int32_t remote = transfer(e).remote;
  if (remote < 0 || static_cast<size_t>(remote) >= remote_ends.size()) return nullptr;
  return &remote_ends[static_cast<size_t>(remote)];
}

const TraceDeviceInfo* TraceData::device(int32_t id) const {
  for (const TraceDeviceInfo& d : header.devices)
    if (d.id == id) return &d;
  return nullptr;
}

}  // namespace dpscope::trace
