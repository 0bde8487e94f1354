// What a rank claims to run at a collective, and the one way ranks report that they disagree.
//
// Every check of the ranks' calls (the sim leader's, the mpi neighbours', FingerprintCheck around
// any other backend: api/fingerprint_check.hpp) compares these Signatures and words a mismatch
// with the functions below, as c10d's ProcessGroupWrapper does ("Detected mismatch between
// collectives on ranks. Rank 0 is running collective: CollectiveFingerPrint(...), but Rank 1 is
// running collective: ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dpscope/comm/types.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope::detail {

// What a rank claims to be running: compared across ranks at every collective.
struct Signature {
  OpType op = OpType::kAllReduce;
  DType dtype = DType::kF32;
  Shape shape;  // the tensor that sizes the collective (ProcessGroup docs)
  int root = -1;
  std::optional<ReduceOp> reduce_op;
  std::optional<Algorithm> algorithm;
  bool meta = false;       // timing-only (no data)
  std::vector<int> ranks;  // new_group
  bool operator==(const Signature&) const = default;
};

// "CollectiveFingerPrint(SequenceNumber=3, OpType=ALLREDUCE, TensorShape=[4], ...)".
std::string fingerprint(const Signature& signature, int64_t seq);

// The message of ranks whose fingerprints differ from rank 0's (`differing`, ascending, not
// empty), naming rank 0's call and the first differing rank's: "Detected mismatch between
// collectives on ranks. Rank 0 is running collective: <rank0>, but Rank 2 is running collective:
// <theirs> (ranks that differ from rank 0: [2, 3])".
std::string mismatch_with_rank0(const std::string& rank0, int first_differing, const std::string& theirs,
                                const std::vector<int>& differing);

// The message of a rank whose left-hand neighbour runs another collective (the mpi backend's
// check, which compares neighbours only): "Detected mismatch between collectives on ranks. Rank 1
// is running collective: <left>, but Rank 2 is running collective: <mine>".
std::string mismatch_with_neighbour(int left, const std::string& left_fingerprint, int rank,
                                    const std::string& mine);

}  // namespace dpscope::detail
