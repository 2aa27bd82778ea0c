#include "backend/cuda/device_quantizer.h"

#include <stdexcept>
#include <vector>

#include "arith/cast_span.h"
#include "backend/cuda/quantize_kernels.h"
#include "backend/quantize_plan.h"

namespace drift::cuda {

namespace {

// Copies x (rows x k with one unit stride) to dev as a dense array in the same memory order; returns
// the strides of the copy.
void upload_input(DeviceBuffer<double>& dev, const StridedInput& x, size_t rows, size_t k, uint64_t* rs,
                  uint64_t* cs) {
  if (x.cs != 1 && x.rs != 1) throw std::invalid_argument("device quantizer: the input needs a unit stride");
  const bool k_major = x.cs == 1;  // as element_at walks it: rows of k, else columns of rows
  const size_t lines = k_major ? rows : k, len = k_major ? k : rows, pitch = k_major ? x.rs : x.cs;
  *rs = k_major ? k : 1;
  *cs = k_major ? 1 : rows;
  dev.resize(rows * k);
  if (rows * k == 0) return;
  if (lines == 1 || pitch == len) {
    dev.upload(x.p, rows * k);
  } else {
    check(cudaMemcpy2D(dev.get(), len * sizeof(double), x.p, pitch * sizeof(double), len * sizeof(double), lines,
                       cudaMemcpyHostToDevice),
          "cudaMemcpy2D to device");
  }
}

bool all_finite(const std::vector<double>& v) {
  for (double x : v)
    if (is_nan(x) || is_inf(x)) return false;
  return true;
}

}  // namespace

void DeviceQuantizer::quantize(DeviceOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                               uint64_t seed, uint64_t stream, DelayedState* state, bool want_float) {
  QuantizeSetup s = begin_quantize(rows, k, qz, seed, stream, state);  // throws before anything runs
  QuantizePlan& p = s.plan;
  upload_input(input_, x, rows, k, &p.rs, &p.cs);
  p.x = input_.get();
  if (s.hadamard) {
    rotated_.resize(rows * k);
    const HadamardPlan h{input_.get(), p.rs, p.cs, rows, k, qz.scaling.hadamard, qz.scaling.hadamard_seed,
                         rotated_.get()};
    launch_hadamard(h, nullptr);
    p.x = rotated_.get();
    p.rs = k;
    p.cs = 1;
  }
  out.rows = rows;
  out.k = k;
  out.block_k = p.block;
  out.blocks_per_row = p.blocks_per_row;
  out.in_float = want_float && fits_float(qz.format);
  if (out.in_float) {
    out.qf.resize(rows * k);
    p.qf = out.qf.get();
  } else {
    out.q.resize(rows * k);
    p.q = out.q.get();
  }
  out.block_scale.resize(s.row_blocks);
  rb_amax_.resize(s.row_blocks);
  rb_nonfinite_.resize(s.row_blocks);
  region_mult_.resize(s.regions);
  region_state_.resize(s.regions);
  p.block_scale = out.block_scale.get();
  p.rb_amax = rb_amax_.get();
  p.rb_nonfinite = rb_nonfinite_.get();
  p.region_mult = region_mult_.get();
  p.region_state = region_state_.get();

  const QuantCounts zero;  // (min/max start at the ends of int's range)
  counts_.upload(&zero, 1);
  QuantCounts counts;
  if (s.pass1) {
    if (p.block) launch_row_block_counts(p, counts_.get(), nullptr);
    else launch_tensor_counts(p, counts_.get(), nullptr);
    if (s.pass1_sets_scale) {  // the tensor's amax sets the scale of every element: wait for it
      counts_.download(&counts, 1);
      apply_tensor_amax(s, qz, double_of(counts.amax_bits));
    }
  }
  if (s.pass2) launch_region_scales(p, counts_.get(), nullptr);
  launch_quantize_elements(p, counts_.get(), nullptr);
  counts_.download(&counts, 1);  // synchronises; reports kernel faults
  out.stats = finish_quantize(s, qz, counts, state);
  out.tensor_scale = s.tensor_scale;
  out.all_finite = counts.nonfinite_values == 0;
  out.quantized_on_device = true;
}

void upload_quantized(DeviceOperand& out, const QuantizedOperand& q, const Format& format, bool want_float) {
  out.rows = q.rows;
  out.k = q.k;
  out.block_k = q.block_k;
  out.blocks_per_row = q.blocks_per_row;
  out.tensor_scale = q.tensor_scale;
  out.stats = q.stats;
  out.in_float = want_float && fits_float(format);
  out.quantized_on_device = false;
  std::vector<double> wide;
  const std::vector<double>* values = &q.q;
  if (q.in_float) {  // (a float-entry operand: widen a copy)
    wide.assign(q.qf.begin(), q.qf.begin() + static_cast<std::ptrdiff_t>(q.rows * q.k));
    values = &wide;
  }
  out.all_finite = all_finite(*values) && all_finite(q.block_scale);
  if (out.in_float) {
    const std::vector<float> f(values->begin(), values->end());  // exact: the grid fits in float
    out.qf.upload(f);
  } else {
    out.q.upload(*values);
  }
  out.block_scale.upload(q.block_scale);
}

void download_quantized(const DeviceOperand& in, QuantizedOperand& out) {
  out.rows = in.rows;
  out.k = in.k;
  out.in_float = in.in_float;
  out.q.assign(in.in_float ? 0 : in.rows * in.k, 0.0);
  out.qf.assign(in.in_float ? in.rows * in.k : 0, 0.0f);
  if (in.in_float) in.qf.download(out.qf.data(), out.qf.size());
  else in.q.download(out.q.data(), out.q.size());
  out.block_k = in.block_k;
  out.blocks_per_row = in.blocks_per_row;
  out.block_scale.assign(in.block_k ? in.rows * in.blocks_per_row : 0, 0.0);
  in.block_scale.download(out.block_scale.data(), out.block_scale.size());
  out.tensor_scale = in.tensor_scale;
  out.stats = in.stats;
}

}  // namespace drift::cuda

namespace drift {

void cuda_quantize(QuantizedOperand& out, const StridedInput& x, size_t rows, size_t k, const Quantizer& qz,
                   uint64_t seed, uint64_t stream, DelayedState* state, bool want_float) {
  static cuda::DeviceQuantizer quantizer;  // (tests: one thread)
  cuda::DeviceOperand op;
  quantizer.quantize(op, x, rows, k, qz, seed, stream, state, want_float);
  cuda::download_quantized(op, out);
}

}  // namespace drift
