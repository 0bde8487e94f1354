// Backend's default implementations: every op a backend does not override is unsupported.
#include "dpscope/comm/backend.hpp"

#include "dpscope/base/error.hpp"

namespace dpscope {

void Backend::unsupported(OpType op) const {
  throw Error(ErrorKind::kUnsupported, fmt::format("backend '{}' does not support {}", name(), api_name(op)));
}

std::shared_ptr<Work> Backend::all_reduce(Tensor&, const AllreduceOptions&) {
  unsupported(OpType::kAllReduce);
}
std::shared_ptr<Work> Backend::broadcast(Tensor&, const BroadcastOptions&) {
  unsupported(OpType::kBroadcast);
}
std::shared_ptr<Work> Backend::reduce(Tensor&, const ReduceOptions&) { unsupported(OpType::kReduce); }
void Backend::unsupported_out_of_place(OpType op) const {
  throw Error(ErrorKind::kUnsupported,
              fmt::format("backend '{}' does not support {} out of place (separate input and output "
                          "tensors); pass one tensor for the in-place form",
                          name(), api_name(op)));
}

std::shared_ptr<Work> Backend::all_reduce_into(Tensor&, const Tensor&, const AllreduceOptions&) {
  unsupported_out_of_place(OpType::kAllReduce);
}
std::shared_ptr<Work> Backend::broadcast_into(Tensor&, const Tensor&, const BroadcastOptions&) {
  unsupported_out_of_place(OpType::kBroadcast);
}
std::shared_ptr<Work> Backend::reduce_into(Tensor&, const Tensor&, const ReduceOptions&) {
  unsupported_out_of_place(OpType::kReduce);
}
std::shared_ptr<Work> Backend::all_gather(std::vector<Tensor>&, const Tensor&, bool,
                                          const AllgatherOptions&) {
  unsupported(OpType::kAllGather);
}
std::shared_ptr<Work> Backend::reduce_scatter(Tensor&, const std::vector<Tensor>&, bool,
                                              const ReduceScatterOptions&) {
  unsupported(OpType::kReduceScatter);
}
std::shared_ptr<Work> Backend::scatter(Tensor&, const std::vector<Tensor>&, const ScatterOptions&) {
  unsupported(OpType::kScatter);
}
std::shared_ptr<Work> Backend::gather(const Tensor&, std::vector<Tensor>&, const GatherOptions&) {
  unsupported(OpType::kGather);
}
std::shared_ptr<Work> Backend::all_to_all_single(Tensor&, const Tensor&, const AllToAllOptions&) {
  unsupported(OpType::kAllToAll);
}
std::shared_ptr<Work> Backend::barrier(const BarrierOptions&) { unsupported(OpType::kBarrier); }
std::shared_ptr<Work> Backend::send(const Tensor&, int, const PointToPointOptions&) {
  unsupported(OpType::kSend);
}
std::shared_ptr<Work> Backend::recv(Tensor&, int, const PointToPointOptions&) { unsupported(OpType::kRecv); }
std::unique_ptr<Backend> Backend::new_group(const std::vector<int>&, const NewGroupOptions&) {
  unsupported(OpType::kNewGroup);
}

}  // namespace dpscope
