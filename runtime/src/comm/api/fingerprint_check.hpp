// FingerprintCheck: the ranks' agreement on each collective, as a Backend around any other
// backend (c10d's ProcessGroupWrapper). Before a collective reaches the inner backend, every rank
// puts its fingerprint (api/fingerprint.hpp: op, dtype, shape, reduce op, root, algorithm asked
// for, sequence number) in the group's Store and reads every peer's; if one differs from rank 0's,
// every rank fails with the same kMismatch line naming rank 0's call and the first differing
// rank's, instead of handing the library calls that cannot match (NCCL then hangs or reads past
// buffers). Point-to-point calls are not checked (their pairs are not collective calls).
//
// Which backends use it: those that do not compare calls themselves, i.e. nccl (cuda/). sim
// compares the arrivals its leader already holds and mpi exchanges fingerprints with its
// neighbours alongside the data; both word a mismatch with the same functions.
//
// Cost: one set, one wait and size()-1 gets on the store per collective, on the calling thread,
// which therefore waits until every rank has called the same collective. That wait ends at once
// when a peer failed (abort(), told through the store: "aborted because rank 1 failed: ...") or
// returned without calling (rank_finished(): kMismatch "can never complete"), as on the sim
// backend, else after the group's timeout (kTimeout naming the ranks that never came); a waiting
// rank looks for those every 100 ms. Fingerprint keys are deleted once every rank read them.
//
// Thread semantics: as any Backend (one rank's thread); the store is shared and thread-safe.
#pragma once

#include <memory>
#include <string>

#include "dpscope/comm/backend.hpp"
#include "dpscope/comm/store.hpp"

namespace dpscope::detail {

// `inner` checked through `store` under keys that start with `prefix` (one prefix per group and
// init round, the same on every rank). A null store leaves `inner` unchecked.
std::unique_ptr<Backend> with_fingerprint_check(std::unique_ptr<Backend> inner, std::shared_ptr<Store> store,
                                                std::string prefix);

}  // namespace dpscope::detail
