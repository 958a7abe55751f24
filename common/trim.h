// trim(): a view of `text` without its leading and trailing whitespace (isspace, "C" locale).
// Pure, header-only; the view points into `text`, so it lives no longer than it.
#pragma once

#include <cctype>
#include <string_view>

namespace flotilla {

inline std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

}  // namespace flotilla
