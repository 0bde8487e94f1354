// KernelCost: the work of one kernel as the roofline model sees it (floating-point operations and
// bytes of memory traffic). Callers state it per op; a simulated device turns it into time
// (core/timing.hpp), traces record it as the span's flops and bytes.
#pragma once

namespace dpscope {

struct KernelCost {
  double flops = 0.0;
  double bytes = 0.0;  // memory traffic: bytes read + bytes written
};

}  // namespace dpscope
