// Collective fingerprints and the mismatch messages (api/fingerprint.hpp).
#include "fingerprint.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dpscope::detail {

std::string fingerprint(const Signature& s, int64_t seq) {
  std::string out = fmt::format("CollectiveFingerPrint(SequenceNumber={}, OpType={}", seq, to_string(s.op));
  if (s.op == OpType::kNewGroup) {
    out += fmt::format(", Ranks=[{}]", fmt::join(s.ranks, ", "));
  } else if (s.op != OpType::kBarrier) {
    out += fmt::format(", TensorShape={}, TensorDtypes={}", shape_to_string(s.shape), to_string(s.dtype));
  }
  if (s.reduce_op) out += fmt::format(", ReduceOp={}", to_string(*s.reduce_op));
  if (s.root >= 0) out += fmt::format(", Root={}", s.root);
  if (s.algorithm) out += fmt::format(", Algorithm={}", to_string(*s.algorithm));
  if (s.meta && s.op != OpType::kBarrier && s.op != OpType::kNewGroup) out += ", TimingOnly=true";
  return out + ")";
}

std::string mismatch_with_rank0(const std::string& rank0, int first_differing, const std::string& theirs,
                                const std::vector<int>& differing) {
  return fmt::format(
      "Detected mismatch between collectives on ranks. Rank 0 is running collective: {}, but Rank {} is "
      "running collective: {} (ranks that differ from rank 0: [{}])",
      rank0, first_differing, theirs, fmt::join(differing, ", "));
}

std::string mismatch_with_neighbour(int left, const std::string& left_fingerprint, int rank,
                                    const std::string& mine) {
  return fmt::format(
      "Detected mismatch between collectives on ranks. Rank {} is running collective: {}, but Rank {} is "
      "running collective: {}",
      left, left_fingerprint, rank, mine);
}

}  // namespace dpscope::detail
