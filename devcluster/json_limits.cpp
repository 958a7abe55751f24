#include "devcluster/json_limits.h"

namespace flotilla::devcluster {

size_t json_nesting_depth(std::string_view bytes) {
  size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : bytes) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) deepest = depth;
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

std::string_view json_depth_problem(std::string_view bytes) {
  if (json_nesting_depth(bytes) <= kMaxJsonNestingDepth) return {};
  return "the body nests arrays and objects more than 10000 levels deep (kube-apiserver's limit): exceeded max depth";
}

}  // namespace flotilla::devcluster
