#include "model/params.h"

namespace drift {

const char* to_string(TensorClass c) {
  switch (c) {
    case TensorClass::activation: return "activation";
    case TensorClass::weight: return "weight";
    case TensorClass::gradient: return "gradient";
  }
  return "?";
}

bool parse_tensor_class(const std::string& s, TensorClass* out) {
  for (TensorClass c : {TensorClass::activation, TensorClass::weight, TensorClass::gradient})
    if (s == to_string(c)) {
      *out = c;
      return true;
    }
  return false;
}

std::string ParamSpec::shape_string() const {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
  return s + ")";
}

size_t ParamTable::add(const std::string& name, std::vector<size_t> shape, bool decay) {
  ParamSpec p;
  p.name = name;
  p.size = 1;
  for (size_t d : shape) p.size *= d;
  p.shape = std::move(shape);
  p.offset = total;
  p.decay = decay;
  total += p.size;
  specs.push_back(std::move(p));
  return specs.back().offset;
}

const ParamSpec* ParamTable::find(const std::string& name) const {
  for (const auto& p : specs)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace drift
