#include "train/opt_state.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "arith/cast_span.h"
#include "arith/catalogue.h"

namespace drift {

bool parse_state_format(const std::string& s, StateFormat* out) {
  if (s == "fp32") *out = StateFormat::fp32;
  else if (s == "bf16") *out = StateFormat::bf16;
  else if (s == "int8_block") *out = StateFormat::int8_block;
  else return false;
  return true;
}

const char* to_string(StateFormat f) {
  switch (f) {
    case StateFormat::fp32: return "fp32";
    case StateFormat::bf16: return "bf16";
    case StateFormat::int8_block: return "int8_block";
  }
  return "?";
}

namespace {

std::array<float, 256> build_dynamic_map(bool is_signed) {
  constexpr int kExpBits = 7;
  std::vector<double> v;
  for (int i = 0; i < kExpBits; ++i) {
    const int items = (is_signed ? (1 << i) : (1 << (i + 1))) + 1;  // grid points over [0.1, 1]
    const double decade = std::pow(10.0, i - (kExpBits - 1));
    for (int k = 0; k + 1 < items; ++k) {
      const double lo = 0.1 + 0.9 * k / (items - 1), hi = 0.1 + 0.9 * (k + 1) / (items - 1);
      v.push_back(decade * (lo + hi) / 2);
      if (is_signed) v.push_back(-decade * (lo + hi) / 2);
    }
  }
  v.push_back(0.0);
  v.push_back(1.0);
  // 2 x (1 + 2 + ... + 64) = 254 signed values, or 2 + 4 + ... + 128 = 254 unsigned ones, plus 0 and 1.
  std::sort(v.begin(), v.end());
  std::array<float, 256> m{};
  for (size_t i = 0; i < 256; ++i) m[i] = static_cast<float>(v[i]);
  return m;
}

const Format& bf16() {
  static const Format f = *find_format("bf16");
  return f;
}

}  // namespace

const std::array<float, 256>& dynamic_map(bool is_signed) {
  static const std::array<float, 256> s = build_dynamic_map(true), u = build_dynamic_map(false);
  return is_signed ? s : u;
}

uint8_t encode_dynamic(float x, const std::array<float, 256>& map) {
  // First code >= x, then the nearer of it and its predecessor (ties to the smaller code).
  const size_t hi = static_cast<size_t>(std::lower_bound(map.begin(), map.end(), x) - map.begin());
  if (hi == 0) return 0;
  if (hi == 256) return 255;
  const double dlo = static_cast<double>(x) - map[hi - 1], dhi = static_cast<double>(map[hi]) - x;
  return static_cast<uint8_t>(dhi < dlo ? hi : hi - 1);
}

void StateBuffer::init(StateFormat f, const ParamTable& table, bool is_signed) {
  fmt_ = f;
  signed_ = is_signed;
  starts_.clear();
  ends_.clear();
  for (const auto& p : table.specs)
    for (size_t b = p.offset; b < p.offset + p.size; b += kBlock) {
      starts_.push_back(b);
      ends_.push_back(std::min(b + kBlock, p.offset + p.size));
    }
  values_.clear();
  codes_.clear();
  absmax_.clear();
  if (f == StateFormat::int8_block) {
    const uint8_t zero = encode_dynamic(0.0f, dynamic_map(is_signed));
    codes_.assign(table.total, zero);
    absmax_.assign(starts_.size(), 0.0f);
  } else {
    values_.assign(table.total, 0.0f);
  }
}

void StateBuffer::load(size_t b, float* out) const {
  const size_t lo = starts_[b], n = ends_[b] - lo;
  if (fmt_ != StateFormat::int8_block) {
    std::copy(values_.begin() + lo, values_.begin() + lo + n, out);
    return;
  }
  const auto& map = dynamic_map(signed_);
  for (size_t i = 0; i < n; ++i) out[i] = map[codes_[lo + i]] * absmax_[b];
}

void StateBuffer::store(size_t b, const float* in) {
  const size_t lo = starts_[b], n = ends_[b] - lo;
  switch (fmt_) {
    case StateFormat::fp32:
      std::copy(in, in + n, values_.begin() + lo);
      return;
    case StateFormat::bf16:
      cast_span(in, values_.data() + lo, n, bf16(), RoundSpec{}, 0, 0, 0);
      return;
    case StateFormat::int8_block: {
      float amax = 0;
      for (size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(in[i]));
      absmax_[b] = amax;
      const auto& map = dynamic_map(signed_);
      for (size_t i = 0; i < n; ++i) codes_[lo + i] = encode_dynamic(amax > 0 ? in[i] / amax : 0.0f, map);
      return;
    }
  }
}

float* StateBuffer::update_begin(size_t b, float* scratch) {
  if (fmt_ != StateFormat::int8_block) return values_.data() + starts_[b];
  load(b, scratch);
  return scratch;
}

void StateBuffer::update_end(size_t b, size_t last, float* values) {
  switch (fmt_) {
    case StateFormat::fp32:
      return;  // updated where it is stored
    case StateFormat::bf16:
      cast_span(values, values, ends_[last] - starts_[b], bf16(), RoundSpec{}, 0, 0, 0);
      return;
    case StateFormat::int8_block:
      if (last != b) throw std::logic_error("StateBuffer::update_end: int8_block blocks are stored one at a time");
      store(b, values);
      return;
  }
}

void StateBuffer::save(BlobWriter& w) const {
  w.u64(static_cast<uint64_t>(fmt_));
  w.vec(values_);
  w.vec(codes_);
  w.vec(absmax_);
}

void StateBuffer::restore(BlobReader& r) {
  if (r.u64() != static_cast<uint64_t>(fmt_)) throw BlobError("optimizer state format differs from the config's");
  r.vec_into(values_, fmt_ == StateFormat::int8_block ? 0 : values_.size(), "optimizer state");
  r.vec_into(codes_, codes_.size(), "optimizer state codes");
  r.vec_into(absmax_, absmax_.size(), "optimizer state block scales");
}

}  // namespace drift
