// ProcessGroup: the collectives a rank calls, in the shape of torch.distributed / c10d.
//
//   auto world = SimWorld::create(4, {.preset = "h100-sxm"});
//   spawn(world, [](ProcessGroup& pg) {                  // one thread per rank, bound to sim:rank
//     Tensor g = Tensor::full({1024}, pg.rank() + 1.0f, pg.device());
//     pg.all_reduce(g, {.op = ReduceOp::kAvg})->wait();  // g == 2.5 everywhere
//   });
//
// Ranks join with init_process_group (below): the backend comes from the registry
// (comm/backend_registry.hpp) and ranks meet through a Store (comm/store.hpp); spawn() does both.
//
// Every op takes an options struct and returns a Work (comm/work.hpp). Ops are checked here for
// arguments (clear kInvalidArgument / kDevice errors, thrown from the call), then run by the
// Backend. Across ranks, each collective carries the group's sequence number and a fingerprint
// (op, dtype, shape, root, reduce op, algorithm); ranks that disagree all fail with kMismatch
// naming both fingerprints, like TORCH_DISTRIBUTED_DEBUG=DETAIL. A rank that never joins makes the
// others fail with kTimeout after the group's timeout (watchdog-style message); a rank that fails
// aborts the group, so its peers fail fast instead of hanging.
//
// Thread semantics: a ProcessGroup object is one rank's view; call it only from that rank's
// thread. Every collective blocks the calling thread until all ranks of the group have joined and
// the data has moved (sim), and never longer than the timeout. Stream semantics (sim): the
// collective runs on the rank's COMM stream, starting when both the comm stream is free and the
// compute stream has reached the call (the input is ready); Work::wait() makes the compute stream
// wait for its end. Results are deterministic: the order of floating-point operations is fixed
// by the algorithm, never by thread timing, and every rank ends with bit-identical values.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dpscope/comm/backend.hpp"
#include "dpscope/comm/store.hpp"
#include "dpscope/comm/types.hpp"
#include "dpscope/comm/work.hpp"
#include "dpscope/core/tensor.hpp"

namespace dpscope {

class SimWorld;

class ProcessGroup {
 public:
  explicit ProcessGroup(std::unique_ptr<Backend> backend);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return backend_->rank(); }
  int size() const { return backend_->size(); }
  const Device& device() const { return backend_->device(); }
  const char* backend_name() const { return backend_->name(); }
  Backend& backend() { return *backend_; }

  // In place: every rank's `tensor` becomes op(tensor of rank 0, ..., tensor of rank n-1).
  std::shared_ptr<Work> all_reduce(Tensor& tensor, const AllreduceOptions& options = {});
  // In place: every rank's `tensor` becomes the root's.
  std::shared_ptr<Work> broadcast(Tensor& tensor, const BroadcastOptions& options = {});
  // The root's `tensor` becomes the reduction of all ranks' tensors; other ranks' tensors are
  // left unchanged (partial results live in scratch buffers).
  std::shared_ptr<Work> reduce(Tensor& tensor, const ReduceOptions& options = {});
  // Out of place (NCCL's sendbuff != recvbuff, nccl-tests' out-of-place column): as all_reduce,
  // broadcast and reduce, but the data is read from `input` and the result written to `output`;
  // `input` is left unchanged. The first step of the schedule reads the send buffer (no copy into
  // `output` first). `output` and `input` have the same numel and dtype; they are the same tensor
  // (then the call is the in-place form) or do not overlap (kInvalidArgument otherwise).
  // broadcast_into: only the root's `input` is read; reduce_into: only the root's `output` is
  // written (other ranks' partial results live in scratch buffers).
  std::shared_ptr<Work> all_reduce_into(Tensor& output, const Tensor& input,
                                        const AllreduceOptions& options = {});
  std::shared_ptr<Work> broadcast_into(Tensor& output, const Tensor& input,
                                       const BroadcastOptions& options = {});
  std::shared_ptr<Work> reduce_into(Tensor& output, const Tensor& input, const ReduceOptions& options = {});
  // outputs[i] = rank i's `input`; `outputs` holds size() tensors shaped like `input`.
  std::shared_ptr<Work> all_gather(std::vector<Tensor>& outputs, const Tensor& input,
                                   const AllgatherOptions& options = {});
  // Rank i's `input` lands in `output` at elements [i * input.numel(), (i + 1) * input.numel()).
  // In place (nccl-tests' in-place column): `input` is that block of `output` itself (a rows() view).
  std::shared_ptr<Work> all_gather_into_tensor(Tensor& output, const Tensor& input,
                                               const AllgatherOptions& options = {});
  // `output` = op over ranks of their inputs[rank()]; `inputs` holds size() tensors shaped like
  // `output`; inputs are left unchanged.
  std::shared_ptr<Work> reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                       const ReduceScatterOptions& options = {});
  // `input` holds size() * output.numel() elements (its numel must divide by size()). In place
  // (nccl-tests' in-place column): `output` is block rank() of `input` itself (a rows() view).
  std::shared_ptr<Work> reduce_scatter_tensor(Tensor& output, const Tensor& input,
                                              const ReduceScatterOptions& options = {});
  // `output` = the root's inputs[rank()]; only the root passes `inputs` (size() tensors).
  std::shared_ptr<Work> scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                const ScatterOptions& options = {});
  // The root's outputs[i] = rank i's `input`; only the root passes `outputs` (size() tensors).
  std::shared_ptr<Work> gather(const Tensor& input, std::vector<Tensor>& outputs,
                               const GatherOptions& options = {});
  // torch.distributed.all_to_all_single(output, input) with equal splits: `input`'s first dimension
  // holds size() equal blocks; block j goes to rank j, and `output`'s block i (same layout) comes
  // from rank i. `output` and `input` have the same number of elements and the same dtype, and
  // both first dimensions divide by size(); input is left unchanged (docs/collectives.md). In
  // place: `output` may be `input` itself.
  std::shared_ptr<Work> all_to_all_single(Tensor& output, const Tensor& input,
                                          const AllToAllOptions& options = {});
  // Returns once every rank has called barrier(); wait() aligns this rank's compute stream with
  // the barrier's simulated end (a dissemination barrier: ceil(log2 n) rounds of signals).
  std::shared_ptr<Work> barrier(const BarrierOptions& options = {});
  // Point to point. send() returns at once; its Work completes when `dst` receives (do not modify
  // `tensor` before wait()). recv() blocks until the matching send (same tag) arrives; dtype and
  // numel must match the sender's, else both fail with kMismatch.
  std::shared_ptr<Work> send(const Tensor& tensor, int dst, const PointToPointOptions& options = {});
  std::shared_ptr<Work> recv(Tensor& tensor, int src, const PointToPointOptions& options = {});

  // A sub-group of this group's `ranks` (torch.distributed.new_group). Every rank of this group
  // must call it, with the same ranks, in the same order relative to its other collectives.
  // Members get their view (group ranks follow the sorted `ranks`); other ranks get nullptr.
  std::shared_ptr<ProcessGroup> new_group(std::vector<int> ranks, const NewGroupOptions& options = {});

 private:
  void check_tensor(const Tensor& tensor, OpType op, const char* what) const;
  void check_root(int root, OpType op) const;
  void check_peer(int peer, OpType op) const;

  std::unique_ptr<Backend> backend_;
};

// Options of init_process_group (c10d's init_process_group arguments as plain data):
//
//   auto store = std::make_shared<InMemoryStore>();            // shared by the rank threads
//   init_process_group({.backend = "sim", .store = store, .rank = r, .world_size = n,
//                       .timeout = Milliseconds(60000), .world = world});
struct InitOptions {
  std::string backend = "sim";  // a registered name (comm/backend_registry.hpp)
  // Where the ranks meet: each rank announces itself and waits for all the others, so a rank
  // that never arrives fails everyone's init within `timeout`, naming it. Null: no rendezvous at
  // init (the sim backend's ranks then first meet at their first collective, through `world`).
  std::shared_ptr<Store> store;
  int rank = -1;        // this thread's or process's rank, 0 .. world_size - 1
  int world_size = -1;  // number of ranks
  // The rendezvous' limit and the group's default collective timeout. 0: the store's timeout for
  // the rendezvous, the backend's default for collectives (sim: SimWorldOptions::timeout).
  Milliseconds timeout{0};
  // sim: the simulated machine the rank threads share (explicit, no hidden global), of
  // world_size ranks; cuda, nccl: a world of cuda devices (make_cuda_world, comm/gpu_backends.hpp).
  std::shared_ptr<SimWorld> world;
};

// torch.distributed.init_process_group: this thread becomes rank options.rank of
// options.world_size in a group of backend options.backend. Checks sizes and ranks
// (kInvalidArgument), finds the backend (kUnsupported for one this build lacks: cuda and nccl
// without CUDA, mpi without MPI; kInvalidArgument for an unknown name, listing the registered
// ones), meets the other ranks in options.store (kTimeout naming the ranks that never arrived;
// kMismatch if ranks disagree on the backend or the world size), then creates the backend.
std::shared_ptr<ProcessGroup> init_process_group(const InitOptions& options);

// The short form: `backend`, `rank` and `world_size` replace those fields of `options`.
//   init_process_group("sim", rank, n, {.world = world});
std::shared_ptr<ProcessGroup> init_process_group(const std::string& backend, int rank, int world_size,
                                                 InitOptions options);

}  // namespace dpscope
