// Operand quantization on the GPU: quantize_into's contract (values, block scales, tensor scale,
// QuantStats, delayed-scaling state) computed by the quantize kernels, the operand left in device
// memory in the layout the matmul kernels read. Host code; see backend/quantize_plan.h for the
// host half it shares with the host tests and backend/cuda/quantize_kernels.h for the passes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "arith/quantize.h"
#include "backend/cuda/device_buffer.h"
#include "backend/quantize_steps.h"

namespace drift::cuda {

// A quantized operand in device memory, in the engine's canonical layout (rows x k, k contiguous).
struct DeviceOperand {
  size_t rows = 0, k = 0, block_k = 0, blocks_per_row = 0;
  double tensor_scale = 1.0;
  QuantStats stats;
  bool in_float = false;    // the values are in qf (floats: the fast kernel's), else in q
  bool all_finite = true;   // every value and block scale is finite (the fast kernel's precondition)
  bool quantized_on_device = false;  // else quantized by the CPU engine and uploaded
  DeviceBuffer<double> q, block_scale;  // block_scale: rows x blocks_per_row when block_k != 0
  DeviceBuffer<float> qf;
};

class DeviceQuantizer {
 public:
  // Quantizes x (rows x k in host memory, element (r, c) at x.p[r*x.rs + c*x.cs], one of the strides
  // 1) on the device into out, with the values as floats when `want_float` and the format's grid fits
  // in float. Everything quantize_into would produce, bit for bit; throws as it does.
  void quantize(DeviceOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz, uint64_t seed,
                uint64_t stream, DelayedState* state, bool want_float);

 private:
  DeviceBuffer<double> input_, rotated_, rb_amax_, region_mult_;
  DeviceBuffer<uint32_t> rb_nonfinite_;
  DeviceBuffer<uint8_t> region_state_;
  DeviceBuffer<QuantCounts> counts_;
};

// A CPU-quantized operand copied to the device (as floats when `want_float` and the format fits).
void upload_quantized(DeviceOperand& out, const QuantizedOperand& q, const Format& format, bool want_float);

// The device operand copied back into a QuantizedOperand (values in q, or in qf when in_float).
void download_quantized(const DeviceOperand& in, QuantizedOperand& out);

}  // namespace drift::cuda
