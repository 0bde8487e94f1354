// Names, parsers and bus-bandwidth factors of the collectives' vocabulary (comm/types.hpp).
#include "dpscope/comm/types.hpp"

#include <cstdlib>
#include <string>

#include "dpscope/base/ascii.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope {
const char* to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kProduct: return "prod";
    case ReduceOp::kMin: return "min";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

ReduceOp parse_reduce_op(std::string_view text) {
  const std::string t = ascii_lower(text);
  if (t == "sum") return ReduceOp::kSum;
  if (t == "avg") return ReduceOp::kAvg;
  if (t == "prod" || t == "product") return ReduceOp::kProduct;
  if (t == "min") return ReduceOp::kMin;
  if (t == "max") return ReduceOp::kMax;
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("unknown reduce op '{}' (expected sum, avg, prod, min or max)", text));
}

const char* to_string(OpType op) {
  switch (op) {
    case OpType::kAllReduce: return "ALLREDUCE";
    case OpType::kBroadcast: return "BROADCAST";
    case OpType::kReduce: return "REDUCE";
    case OpType::kAllGather: return "ALLGATHER";
    case OpType::kReduceScatter: return "REDUCE_SCATTER";
    case OpType::kScatter: return "SCATTER";
    case OpType::kGather: return "GATHER";
    case OpType::kBarrier: return "BARRIER";
    case OpType::kSend: return "SEND";
    case OpType::kRecv: return "RECV";
    case OpType::kNewGroup: return "NEW_GROUP";
    case OpType::kAllToAll: return "ALLTOALL";
  }
  return "?";
}

const char* api_name(OpType op) {
  switch (op) {
    case OpType::kAllReduce: return "all_reduce";
    case OpType::kBroadcast: return "broadcast";
    case OpType::kReduce: return "reduce";
    case OpType::kAllGather: return "all_gather";
    case OpType::kReduceScatter: return "reduce_scatter";
    case OpType::kScatter: return "scatter";
    case OpType::kGather: return "gather";
    case OpType::kBarrier: return "barrier";
    case OpType::kSend: return "send";
    case OpType::kRecv: return "recv";
    case OpType::kNewGroup: return "new_group";
    case OpType::kAllToAll: return "all_to_all";
  }
  return "?";
}

const char* to_string(Algorithm algo) {
  switch (algo) {
    case Algorithm::kDefault: return "default";
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNaive: return "naive";
  }
  return "?";
}

Algorithm parse_algorithm(std::string_view text, std::string_view what) {
  const std::string t = ascii_lower(text);
  if (t == "auto") return Algorithm::kAuto;
  if (t == "ring") return Algorithm::kRing;
  if (t == "tree") return Algorithm::kTree;
  if (t == "naive") return Algorithm::kNaive;
  throw Error(ErrorKind::kInvalidArgument,
              fmt::format("{}: unknown algorithm '{}' (expected ring, tree, naive or auto)", what, text));
}

Algorithm algorithm_from_env() {
  const char* env = std::getenv("DPSCOPE_ALGO");
  return env != nullptr && *env != '\0' ? parse_algorithm(env, "DPSCOPE_ALGO") : Algorithm::kAuto;
}

double bus_bandwidth_factor(OpType op, int ranks) {
  const double n = ranks;
  if (ranks <= 0) return 0.0;
  switch (op) {
    case OpType::kAllReduce: return 2.0 * (n - 1.0) / n;
    case OpType::kAllGather:
    case OpType::kReduceScatter:
    case OpType::kAllToAll: return (n - 1.0) / n;
    default: return 1.0;
  }
}

int64_t nccl_tests_elements(OpType op, uint64_t bytes, int ranks, size_t element_bytes) {
  DPS_CHECK(ranks >= 1 && element_bytes >= 1, ErrorKind::kInvalidArgument,
            "nccl_tests_elements: {} ranks, {}-byte elements", ranks, element_bytes);
  const int64_t elems = static_cast<int64_t>(bytes / element_bytes);
  const int64_t n = ranks;
  switch (op) {
    case OpType::kAllGather:
    case OpType::kReduceScatter: {
      constexpr int64_t kAlign = 4;  // so 1000 B over 4 ranks is 60 floats each, not 62
      return elems / (kAlign * n) * kAlign * n;
    }
    case OpType::kAllToAll: return elems / n * n;
    default: return elems;
  }
}

}  // namespace dpscope
