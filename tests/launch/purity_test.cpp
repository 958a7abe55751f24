// launch/megatron* is pure: no file or console I/O, no processes or threads, no clock, no
// environment. Scans the sources with comments and string literals blanked (a contract may name
// what it avoids) and fails naming file:line; the scanner's own test makes sure it can fail.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

const std::vector<std::pair<std::regex, std::string>>& rules() {
  static const std::vector<std::pair<std::regex, std::string>> list = {
      {std::regex(R"(<fstream>|<filesystem>|<iostream>|\bstd::(cout|cerr|cin)\b)"), "file or console I/O"},
      {std::regex(R"(\bf?open\s*\(|\b(f|v)?printf\s*\(|\bputs\s*\(|\bfwrite\s*\(|\bfread\s*\()"), "stdio I/O"},
      {std::regex(R"(\bsystem\s*\(|\bpopen\s*\(|\bfork\s*\(|\bexec[lv]p?e?\s*\(|\bposix_spawn)"), "process start"},
      {std::regex(R"(<thread>|<future>|\bstd::(j)?thread\b|\bstd::async\b)"), "threads"},
      {std::regex(R"(\b(system_clock|steady_clock|high_resolution_clock|clock_gettime|gettimeofday)\b)"), "clock read"},
      {std::regex(R"(\bgetenv\s*\()"), "environment read"},
  };
  return list;
}

// Comments and the insides of string/char literals blanked, line breaks kept.
std::string code_only(const std::string& src) {
  std::string out;
  enum { code, line, block, str, chr } state = code;
  for (std::size_t i = 0; i < src.size(); ++i) {
    const char c = src[i], next = i + 1 < src.size() ? src[i + 1] : '\0';
    if (c == '\n') {
      if (state == line) state = code;
      out += '\n';
      continue;
    }
    if (state == code) {
      if (c == '/' && next == '/') state = line;
      else if (c == '/' && next == '*') state = block, ++i;
      else if (c == '"') state = str, out += c;
      else if (c == '\'') state = chr, out += c;
      else out += c;
    } else if (state == block) {
      if (c == '*' && next == '/') state = code, ++i;
    } else if (state == str || state == chr) {
      if (c == '\\') ++i;
      else if ((state == str && c == '"') || (state == chr && c == '\'')) state = code, out += c;
    }
  }
  return out;
}

std::vector<std::string> violations(const std::string& name, const std::string& source) {
  std::vector<std::string> found;
  std::istringstream in(code_only(source));
  std::string text;
  for (int number = 1; std::getline(in, text); ++number)
    for (const auto& [re, what] : rules())
      if (std::regex_search(text, re))
        found.push_back(name + ":" + std::to_string(number) + ": " + what +
                        " (launch/ renders commands only; the shell that runs them does I/O)");
  return found;
}

TEST(LaunchPurity, MegatronSourcesDoNoIoNoClockNoProcesses) {
  int scanned = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(FLOTILLA_SOURCE_DIR) / "launch")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("megatron", 0) != 0) continue;
    std::ifstream in(entry.path());
    std::stringstream buffer;
    buffer << in.rdbuf();
    for (const std::string& v : violations("launch/" + name, buffer.str())) ADD_FAILURE() << v;
    ++scanned;
  }
  EXPECT_GE(scanned, 2);
}

TEST(LaunchPurity, ScannerFindsWhatItLooksFor) {
  EXPECT_EQ(violations("x.cpp", "int a;\nauto t = std::chrono::steady_clock::now();\n").size(), 1u);
  EXPECT_EQ(violations("x.cpp", "std::printf(\"%d\", 1);").size(), 1u);
  EXPECT_EQ(violations("x.cpp", "const char* h = getenv(\"HOME\");").size(), 1u);
  EXPECT_TRUE(violations("x.cpp", "// no getenv( here\nstd::string s = \"popen(\";\nstd::snprintf(b, 4, \"x\");").empty());
}

}  // namespace
