#include "process/proc_table.h"

#include <dirent.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace flotilla::process {

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open)
    return std::nullopt;
  ProcStat s;
  s.pid = static_cast<pid_t>(std::atol(std::string(text.substr(0, open)).c_str()));
  // After ")": field 3 (state) onwards, space separated.
  std::istringstream in(std::string(text.substr(close + 1)));
  std::string field;
  std::vector<std::string> fields;  // fields[0] is field 3
  while (in >> field && fields.size() < 20) fields.push_back(field);
  if (fields.size() < 20) return std::nullopt;
  s.state = fields[0].empty() ? '?' : fields[0][0];
  s.ppid = static_cast<pid_t>(std::atol(fields[1].c_str()));
  s.pgid = static_cast<pid_t>(std::atol(fields[2].c_str()));
  s.sid = static_cast<pid_t>(std::atol(fields[3].c_str()));
  s.start_time = std::strtoull(fields[19].c_str(), nullptr, 10);  // field 22
  return s;
}

std::optional<ProcStat> read_proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_proc_stat(text);
}

std::optional<unsigned long long> process_start_time(pid_t pid) {
  auto s = read_proc_stat(pid);
  if (!s) return std::nullopt;
  return s->start_time;
}

std::vector<ProcStat> list_processes() {
  std::vector<ProcStat> out;
  DIR* dir = ::opendir("/proc");
  if (!dir) return out;
  while (dirent* e = ::readdir(dir)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    if (auto s = read_proc_stat(static_cast<pid_t>(pid))) out.push_back(*s);
  }
  ::closedir(dir);
  return out;
}

std::vector<pid_t> descendants(pid_t root, const std::vector<ProcStat>& table) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& s : table) children.emplace(s.ppid, s.pid);
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    pid_t p = todo.back();
    todo.pop_back();
    auto [a, b] = children.equal_range(p);
    for (auto it = a; it != b; ++it) {
      if (it->second == root) continue;
      out.push_back(it->second);
      todo.push_back(it->second);
    }
    if (out.size() > table.size()) break;  // a ppid cycle cannot happen, but never loop
  }
  return out;
}

bool environ_has(pid_t pid, std::string_view entry) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  if (!in) return false;
  std::string item;
  while (std::getline(in, item, '\0'))
    if (item == entry) return true;
  return false;
}

}  // namespace flotilla::process
