// Parameters live in one buffer; a table of named views says where each tensor sits, its shape
// and its tensor class (llm.c style). Checkpoints, the gradient norm and "compare every tensor by
// name" are then one loop over the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace drift {

// The class of a matmul operand, as policy rules match it (DESIGN.md, "Policy").
enum class TensorClass : uint8_t { activation, weight, gradient };
const char* to_string(TensorClass c);
bool parse_tensor_class(const std::string& s, TensorClass* out);

struct ParamSpec {
  std::string name;            // e.g. "hidden0.w", "block1.attn.qkv.w"
  std::vector<size_t> shape;   // row-major; a linear weight is (out, in)
  size_t offset = 0, size = 0; // elements, in the shared buffer
  bool decay = true;           // AdamW weight decay applies (weights yes; biases, LayerNorm, no)
  std::string shape_string() const;
};

struct ParamTable {
  std::vector<ParamSpec> specs;
  size_t total = 0;
  // Appends a tensor; returns its offset.
  size_t add(const std::string& name, std::vector<size_t> shape, bool decay = true);
  const ParamSpec* find(const std::string& name) const;
};

}  // namespace drift
