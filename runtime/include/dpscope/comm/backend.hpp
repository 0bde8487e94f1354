// Backend: what one communication library provides to a ProcessGroup (c10d's Backend).
//
// ProcessGroup (comm/process_group.hpp) validates arguments that do not depend on the backend
// (roots in range, tensors on this rank's device, list lengths, divisibility) and forwards to a
// Backend, so a backend only implements data movement, rendezvous and timing. Backends: `sim`
// (SimBackend, src/comm: one thread per rank, explicit step-by-step algorithms); `cuda` (the same
// SimBackend with its data on cuda devices) and `nccl` (src/comm/cuda, comm/gpu_backends.hpp) in a
// build with CUDA; `mpi` (src/comm/mpi: ranks that are processes under mpirun or `dpscope launch`)
// in a build with MPI. Each registers a factory (comm/backend_registry.hpp). An op a backend lacks
// throws kUnsupported naming it.
//
// Thread semantics: a Backend object is the view of one rank; every call comes from that rank's
// thread. Calls are blocking on the host until the peers joined (see work.hpp for what is left
// pending) and return a Work; they never block longer than the group's timeout.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpscope/base/error.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/comm/work.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope {

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;  // "sim"
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const Device& device() const = 0;  // the device this rank is bound to
  virtual Milliseconds timeout() const = 0;  // the group's default timeout

  // Semantics of each op: see ProcessGroup, which documents them for users. Arguments arrive
  // validated; `outputs`/`inputs` lists are only meaningful where ProcessGroup says so.
  virtual std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options);
  virtual std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options);
  virtual std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options);
  // Out of place (ProcessGroup::all_reduce_into, ...): `output` and `input` are distinct, same
  // numel and dtype (validated). The default throws kUnsupported naming the form.
  virtual std::shared_ptr<Work> all_reduce_into(Tensor& output, const Tensor& input,
                                                const AllreduceOptions& options);
  virtual std::shared_ptr<Work> broadcast_into(Tensor& output, const Tensor& input,
                                               const BroadcastOptions& options);
  virtual std::shared_ptr<Work> reduce_into(Tensor& output, const Tensor& input,
                                            const ReduceOptions& options);
  // `outputs` holds size() tensors shaped like `input` (all_gather) or one flat tensor of
  // size() * input.numel() elements (all_gather_into_tensor: `flat_output` true).
  virtual std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                           bool flat_output, const AllgatherOptions& options);
  // `inputs` holds size() tensors shaped like `output`, or one flat tensor (flat_input true).
  virtual std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                               bool flat_input, const ReduceScatterOptions& options);
  virtual std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                        const ScatterOptions& options);
  virtual std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                                       const GatherOptions& options);
  // `input` and `output` hold the same number of elements, size() equal blocks each (validated).
  virtual std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                                  const AllToAllOptions& options);
  virtual std::shared_ptr<Work> barrier(const BarrierOptions& options);
  virtual std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options);
  virtual std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options);
  // Creates the backend of a sub-group; every rank of this group calls it with the same sorted,
  // validated `ranks`; returns nullptr on ranks that are not members.
  virtual std::unique_ptr<Backend> new_group(const std::vector<int>& ranks, const NewGroupOptions& options);

  // Failure handling, called by whoever runs the rank (spawn(), or run_as_rank() in a process):
  // this rank failed with (kind, message), so peers blocked in, or later calling, any collective
  // with this rank fail fast naming it instead of waiting for the timeout (c10d's abort()).
  virtual void abort(ErrorKind kind, const std::string& message) = 0;
  // This rank's function returned: collectives still waiting for it can never complete, so peers
  // waiting in them fail at once.
  virtual void rank_finished() = 0;

 protected:
  // Throws kUnsupported: "backend 'sim' does not support <op>".
  [[noreturn]] void unsupported(OpType op) const;
  // Throws kUnsupported: "backend 'mpi' does not support <op> out of place (...)".
  [[noreturn]] void unsupported_out_of_place(OpType op) const;
};

}  // namespace dpscope
