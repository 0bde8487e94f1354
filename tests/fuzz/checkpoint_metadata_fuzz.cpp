// libFuzzer target for the checkpoint reader (io/checkpoint.hpp): the bytes of a would-be
// checkpoint file go through load_checkpoint (file, safetensors header, metadata, checksum), then,
// so the fuzzer gets past the checksum, through decode_checkpoint with the checksum recomputed over
// whatever metadata and tensors were read, and on to check_resume_position.
//
// Property: every input is refused with Error(kFormat) (kIo for an unreadable file), or decodes into
// a state with non-negative position fields whose tensors all came from the input; nothing else is
// thrown, nothing crashes. Build and run: bench/fuzz_all.sh; the corpus replays in the normal suite
// (fuzz_replay_checkpoint_metadata, tests/fuzz/corpus/checkpoint_metadata/).
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "dpscope/base/error.hpp"
#include "dpscope/io/checkpoint.hpp"
#include "dpscope/io/safetensors.hpp"

namespace {

bool expected_refusal(const dpscope::Error& e) {
  return e.kind() == dpscope::ErrorKind::kFormat || e.kind() == dpscope::ErrorKind::kIo;
}

void check_state(const dpscope::CheckpointState& s, size_t input_bytes) {
  if (s.steps_done < 0 || s.epoch < 0 || s.batch_in_epoch < 0) std::abort();
  uint64_t tensor_bytes = 0;
  for (const auto& [name, t] : s.model) tensor_bytes += t.nbytes();
  for (const auto& [name, t] : s.optimizer) tensor_bytes += t.nbytes();
  if (tensor_bytes > input_bytes) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("dpscope_checkpoint_fuzz_" + std::to_string(::getpid()) + ".safetensors");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  try {
    check_state(dpscope::load_checkpoint(file), size);
  } catch (const dpscope::Error& e) {
    if (!expected_refusal(e)) std::abort();
  }
  try {
    dpscope::SafetensorsMetadata meta = dpscope::read_safetensors_metadata(file);
    dpscope::NamedTensors tensors = dpscope::load_safetensors_bytes(bytes, "fuzz.safetensors");
    meta["checksum"] = dpscope::checkpoint_checksum(meta, tensors);
    const dpscope::CheckpointState s = dpscope::decode_checkpoint(meta, std::move(tensors), "fuzz");
    check_state(s, size);
    try {
      dpscope::check_resume_position(s, "fuzz", s.steps_done, s.batch_in_epoch + 1);
    } catch (const dpscope::Error& e) {
      if (e.kind() != dpscope::ErrorKind::kFormat) std::abort();  // a position that does not add up
    }
  } catch (const dpscope::Error& e) {
    if (!expected_refusal(e)) std::abort();
  }
  return 0;
}
