// Test helper: deterministic English-like text (so a model has something to learn), written to
// <dir>/corpus.txt. The worker, sidecar and operator tests train on it; the same bytes every run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace flotilla::testing {

inline std::filesystem::path write_corpus(const std::filesystem::path& dir, std::size_t bytes = 40000) {
  static const char* words[] = {"the", "ship",     "sails", "across", "a",     "quiet", "sea",
                                "and", "every",    "crew",  "member", "keeps", "watch", "over",
                                "its", "flotilla", "while", "wind",   "turns", "north"};
  std::string text;
  std::uint64_t x = 42;
  while (text.size() < bytes) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    text += words[(x >> 33) % 20];
    text += ((x >> 20) % 9 == 0) ? ".\n" : " ";
  }
  text.resize(bytes);
  auto path = dir / "corpus.txt";
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

}  // namespace flotilla::testing
