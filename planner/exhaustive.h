// Exhaustive plan search for small instances: the oracle that tests hold search.h against.
//
// Guarantees: exhaustive_search() evaluates with evaluate() every plan of the space described
//   in search.h (every mbs, D, depth, contiguous split, and (pool, TP) per stage that the pools
//   can hold) and ranks the feasible ones exactly as search_plans() does. It shares only the
//   space definition and the constraint check (search_space.h) with the search, none of its
//   pruning, tables or dynamic program.
// Assumes: a small instance; it refuses (failure line) when the space exceeds max_evaluations.
// Caveats: exponential in the number of blocks; meant for tests with a few layers.
#pragma once

#include <cstdint>

#include "planner/search.h"

namespace flotilla::planner {

SearchResult exhaustive_search(const SearchRequest& request, const EvalContext& context,
                               std::int64_t max_evaluations = 2'000'000);

}  // namespace flotilla::planner
