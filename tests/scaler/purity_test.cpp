// scaler/ is the pure core the operator links: it does no file or console I/O, starts no
// processes or threads, reads no clock and no environment, and includes nothing from the shells
// (simulator/, cli/). This test scans every .h and .cpp under scaler/ (comments and string
// literals stripped, so a contract may name what it avoids) and fails naming file:line and the
// fix.
// The scanner's own tests below make sure it can fail.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Rule {
  const char* pattern;  // ECMAScript regex, matched against code with comments/strings removed
  const char* what;
};

struct Forbidden {
  std::regex re;
  const char* what;
};

const std::vector<Forbidden>& forbidden() {
  static const std::vector<Rule> rules = {
      {R"(\b(std::)?(i|o)fstream\b|\bstd::fstream\b)", "file stream (file I/O)"},
      {R"(<fstream>)", "<fstream> (file I/O)"},
      {R"(<filesystem>|\bstd::filesystem\b)", "std::filesystem (file I/O)"},
      {R"(\bf(re)?open\s*\(|\bfdopen\s*\(|\bopen\s*\(\s*[^)])", "fopen/open (file I/O)"},
      {R"(<iostream>|\bstd::(cout|cerr|clog|cin)\b)", "console I/O"},
      {R"(\b(f|v)?printf\s*\(|\bputs\s*\(|\bfputs\s*\(|\bfwrite\s*\(|\bfread\s*\()",
       "stdio I/O (snprintf into a buffer is fine)"},
      {R"(\bstd::system\s*\(|\bsystem\s*\()", "std::system (process start)"},
      {R"(\bpopen\s*\(|\bpclose\s*\()", "popen (process start)"},
      {R"(\b(v)?fork\s*\()", "fork( (process start)"},
      {R"(\bexec[lv]p?e?\s*\(|\bexecvpe\s*\(|\bposix_spawnp?\b)",
       "exec/posix_spawn (process start)"},
      {R"(<thread>|\bstd::(j)?thread\b|<future>|\bstd::async\b|\bpthread_create\b)",
       "threads"},
      {R"(\b(system_clock|steady_clock|high_resolution_clock)\b)", "clock read"},
      {R"(\bstd::time\s*\(|\btime\s*\(\s*(nullptr|NULL|0)\s*\))", "clock read"},
      {R"(\bclock_gettime\b|\bgettimeofday\b)", "clock read"},
      {R"(\b(std::)?(secure_)?getenv\s*\()", "environment read"},
      {R"(^\s*#\s*include\s*"(simulator|cli)/)", "include of a shell (simulator/, cli/)"},
  };
  static const std::vector<Forbidden> list = [] {
    std::vector<Forbidden> out;
    for (const Rule& r : rules) out.push_back({std::regex(r.pattern), r.what});
    return out;
  }();
  return list;
}

// Blanks out // and /* */ comments and the contents of string and character literals, keeping
// line breaks, so line numbers stay right. #include "..." keeps its path (checked above).
std::string strip_comments_and_strings(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  enum { code, line_comment, block_comment, string_lit, char_lit } state = code;
  bool include_line = false;  // inside a #include directive: keep the quoted path
  for (size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    const char next = i + 1 < src.size() ? src[i + 1] : '\0';
    if (c == '\n') {
      include_line = false;
      if (state == line_comment) state = code;
      out += '\n';
      continue;
    }
    switch (state) {
      case code:
        if (c == '#') {
          size_t j = i + 1;
          while (j < src.size() && (src[j] == ' ' || src[j] == '\t')) ++j;
          include_line = src.compare(j, 7, "include") == 0;
        }
        if (c == '/' && next == '/') {
          state = line_comment;
          out += ' ';
        } else if (c == '/' && next == '*') {
          state = block_comment;
          out += "  ";
          ++i;
        } else if (c == '"' && !include_line) {
          state = string_lit;
          out += '"';
        } else if (c == '\'') {
          state = char_lit;
          out += '\'';
        } else {
          out += c;
        }
        break;
      case line_comment:
        out += ' ';
        break;
      case block_comment:
        if (c == '*' && next == '/') {
          state = code;
          out += "  ";
          ++i;
        } else {
          out += ' ';
        }
        break;
      case string_lit:
      case char_lit:
        if (c == '\\' && next != '\n') {
          out += "  ";
          ++i;
        } else if ((state == string_lit && c == '"') || (state == char_lit && c == '\'')) {
          out += c;
          state = code;
        } else {
          out += ' ';
        }
        break;
    }
  }
  return out;
}

// One line per forbidden use: "<name>:<line>: <what>: <the line>".
std::vector<std::string> scan(const std::string& name, const std::string& src) {
  std::vector<std::string> hits;
  const std::string code = strip_comments_and_strings(src);
  std::istringstream code_lines(code), src_lines(src);
  std::string line, original;
  for (int n = 1; std::getline(code_lines, line); ++n) {
    std::getline(src_lines, original);
    for (const Forbidden& f : forbidden()) {
      if (std::regex_search(line, f.re))
        hits.push_back(name + ":" + std::to_string(n) + ": " + f.what + ": " + original);
    }
  }
  return hits;
}

TEST(ScalerPurity, SourcesDoNoIoAndStartNoProcesses) {
  const fs::path room = fs::path(FLOTILLA_SOURCE_DIR) / "scaler";
  ASSERT_TRUE(fs::is_directory(room)) << room;
  std::vector<fs::path> files;
  for (const auto& entry : fs::recursive_directory_iterator(room)) {
    const auto ext = entry.path().extension();
    if (entry.is_regular_file() && (ext == ".h" || ext == ".cpp")) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  // The room holds the scaler's core; an empty scan would pass for the wrong reason.
  ASSERT_GE(files.size(), 10u) << "found only " << files.size() << " sources under " << room;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    ASSERT_TRUE(in) << "cannot read " << file;
    std::stringstream buf;
    buf << in.rdbuf();
    for (const std::string& hit : scan("scaler/" + fs::relative(file, room).string(), buf.str()))
      ADD_FAILURE() << hit
                    << "\n  scaler/ is the pure core (no file I/O, processes, threads, clock or "
                       "environment): move this to simulator/ or a *_io file in the shell";
  }
}

TEST(ScalerPurity, ScannerFindsEachForbiddenUse) {
  const std::vector<std::string> bad = {
      "#include <fstream>",
      "std::ifstream in(path);",
      "std::ofstream out(path);",
      "FILE* f = fopen(path, \"r\");",
      "int rc = std::system(cmd.c_str());",
      "FILE* p = popen(cmd, \"r\");",
      "pid_t pid = fork();",
      "execvp(argv[0], argv);",
      "#include <thread>",
      "std::thread t([] {});",
      "auto t = std::chrono::steady_clock::now();",
      "auto t = std::chrono::system_clock::now();",
      "const char* v = std::getenv(\"HOME\");",
      "std::cout << x;",
      "std::printf(\"%d\", x);",
      "#include <filesystem>",
      "#include \"simulator/simulator.h\"",
  };
  for (const std::string& line : bad)
    EXPECT_FALSE(scan("x.cpp", "int a;\n" + line + "\n").empty()) << line;
  const auto hits = scan("x.cpp", "int a;\nstd::ifstream in(p);\n");
  ASSERT_EQ(hits.size(), 1u);
  EXPECT_EQ(hits[0].rfind("x.cpp:2: ", 0), 0u) << hits[0];
}

TEST(ScalerPurity, ScannerIgnoresCommentsStringsAndLookalikes) {
  const std::string ok =
      "// the shell uses std::ifstream and std::system; we do not\n"
      "/* popen(), fork() and\n   steady_clock::now() are for shells */\n"
      "const char* s = \"fopen( std::system( <thread>\";\n"
      "char c = '\\'';\n"
      "std::snprintf(buf, sizeof buf, \"%d\", x);\n"
      "#include \"scaler/scale_table.h\"\n"
      "int executed = execution_order(x);\n"
      "double open_gpus = reopened;\n";
  EXPECT_TRUE(scan("x.cpp", ok).empty()) << scan("x.cpp", ok).front();
}

}  // namespace
