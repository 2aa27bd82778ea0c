#include "arith/scale_kinds.h"

namespace drift {

const char* to_string(ScaleKind k) { return scale_kind_traits(k).name; }

bool parse_scale_kind(const std::string& s, ScaleKind* out) {
  for (const ScaleKindTraits& t : kScaleKinds)
    if (s == t.name) {
      *out = t.kind;
      return true;
    }
  return false;
}

const char* scale_kind_choices() {
  static const std::string choices = [] {
    std::string c;
    for (const ScaleKindTraits& t : kScaleKinds) {
      if (!c.empty()) c += '|';
      c += t.name;
    }
    return c;
  }();
  return choices.c_str();
}

}  // namespace drift
