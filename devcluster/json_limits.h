// Cheap checks on raw JSON bytes before they are parsed into nlohmann::json, whose copy, dump,
// comparison and merge are recursive: a deeply nested body would overflow a thread's stack in
// any of them (60,000 levels of `{"a":` segfaulted the server and every restart after it).
//
// Guarantees: json_nesting_depth() reads the bytes once, iteratively (no recursion, O(1)
//   memory), skips brackets inside strings (escapes included) and returns the deepest nesting
//   of arrays and objects; it never fails, even on malformed or truncated input (the parser
//   reports those). kMaxJsonNestingDepth is kube-apiserver's limit (10,000 levels).
// Assumes: UTF-8 or any byte string; only ASCII '"', '\\', '[', ']', '{', '}' matter.
// Caveats: a body within the limit is still copied, compared and dumped recursively by
//   nlohmann, so threads that handle requests need deep stacks: flotilla-devcluster's main()
//   gives every thread 64 MiB (pthread_setattr_default_np); 10,000 levels took more than 8 MiB
//   under AddressSanitizer. A process that embeds the library must do the same.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace flotilla::devcluster {

inline constexpr size_t kMaxJsonNestingDepth = 10000;

size_t json_nesting_depth(std::string_view bytes);

// The message of the 400 for a body nested deeper than kMaxJsonNestingDepth ("" when it is not).
std::string_view json_depth_problem(std::string_view bytes);

}  // namespace flotilla::devcluster
