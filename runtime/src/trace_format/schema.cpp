// Names of the serialized enums (docs/trace-format.md).
#include "dpscope/trace_format/schema.hpp"

namespace dpscope {

const char* to_string(StreamKind stream) {
  switch (stream) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kComm: return "comm";
    case StreamKind::kCopy: return "copy";
  }
  return "?";
}

const char* to_string(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::kParameters: return "parameters";
    case MemoryCategory::kGradients: return "gradients";
    case MemoryCategory::kOptimizerState: return "optimizer_state";
    case MemoryCategory::kActivations: return "activations";
    case MemoryCategory::kBuffers: return "buffers";
  }
  return "?";
}

const char* to_string(Phase phase) {
  switch (phase) {
    case Phase::kNone: return "none";
    case Phase::kData: return "data";
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kOptimizer: return "optimizer";
    case Phase::kCheckpoint: return "checkpoint";
  }
  return "?";
}

}  // namespace dpscope
