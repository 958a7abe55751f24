// split_words(): the whitespace-separated words of `text` (a flag's command line, Megatron's
// --data-path blend "0.3 /d/a 0.7 /d/b"); no quoting. Pure, header-only.
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace flotilla {

inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

}  // namespace flotilla
