#include "worker/runtime/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "worker/runtime/crc32.h"
#include "process/stop_flag.h"

namespace fs = std::filesystem;

namespace flotilla::worker {
namespace {

constexpr char kMagic[8] = {'F', 'L', 'O', 'T', 'U', 'N', 'I', 'T'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kHeaderBytes = 8 + 4 + 4 + 8;

[[noreturn]] void io_fail(const std::string& what, const fs::path& p) {
  throw std::runtime_error(what + " '" + p.string() + "': " + std::strerror(errno));
}

void fsync_path(const fs::path& p, bool directory) {
  int fd = ::open(p.c_str(), (directory ? O_RDONLY | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
  if (fd < 0) io_fail("cannot open for fsync", p);
  ::fsync(fd);
  ::close(fd);
}

// Writes pieces to folder/name via a temporary file, fsync and rename.
void write_atomic(const fs::path& folder, const std::string& name,
                  std::span<const std::span<const std::uint8_t>> pieces) {
  fs::path tmp = folder / (name + ".tmp");
  fs::path final_path = folder / name;
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) io_fail("cannot create", tmp);
  for (auto piece : pieces) {
    const std::uint8_t* p = piece.data();
    std::size_t left = piece.size();
    while (left > 0) {
      ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        int saved = errno;
        ::close(fd);
        errno = saved;
        io_fail("cannot write", tmp);
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if (::fsync(fd) != 0) io_fail("cannot fsync", tmp);
  ::close(fd);
  if (::rename(tmp.c_str(), final_path.c_str()) != 0) io_fail("cannot rename into", final_path);
}

template <class T>
std::span<const std::uint8_t> as_bytes_span(const T* p, std::size_t count) {
  return {reinterpret_cast<const std::uint8_t*>(p), count * sizeof(T)};
}

}  // namespace

UnitFileInfo write_unit_file(const fs::path& folder, int unit, std::span<const float> params,
                             std::span<const float> m, std::span<const float> v) {
  if (m.size() != params.size() || v.size() != params.size())
    throw std::logic_error("unit state buffers differ in size");
  fs::create_directories(folder);
  std::uint8_t header[kHeaderBytes];
  std::uint32_t u = static_cast<std::uint32_t>(unit);
  std::uint64_t n = params.size();
  std::memcpy(header, kMagic, 8);
  std::memcpy(header + 8, &kVersion, 4);
  std::memcpy(header + 12, &u, 4);
  std::memcpy(header + 16, &n, 8);
  std::span<const std::uint8_t> pieces[4] = {
      {header, kHeaderBytes}, as_bytes_span(params.data(), n), as_bytes_span(m.data(), n),
      as_bytes_span(v.data(), n)};
  UnitFileInfo info;
  info.unit = unit;
  char name[32];
  std::snprintf(name, sizeof name, "unit_%04d.bin", unit);
  info.file = name;
  info.param_count = n;
  info.bytes = 0;
  std::uint32_t crc = 0;
  for (auto piece : pieces) {
    crc = crc32_update(crc, piece.data(), piece.size());
    info.bytes += piece.size();
  }
  info.crc32 = crc;
  write_atomic(folder, info.file, pieces);
  return info;
}

void write_meta_and_done(const fs::path& folder, const std::string& meta_json) {
  fs::create_directories(folder);
  std::span<const std::uint8_t> meta[1] = {as_bytes_span(meta_json.data(), meta_json.size())};
  write_atomic(folder, "meta.json", meta);
  fsync_path(folder, true);
  static const char kDone[] = "complete\n";
  std::span<const std::uint8_t> done[1] = {as_bytes_span(kDone, sizeof kDone - 1)};
  write_atomic(folder, "DONE", done);
  fsync_path(folder, true);
  fsync_path(folder.parent_path(), true);
}

UnitState read_unit_file(const fs::path& folder, const UnitFileInfo& expected) {
  fs::path path = folder / expected.file;
  const std::string fix = "; delete '" + folder.string() +
                          "' to fall back to the previous checkpoint";
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint file '" + path.string() + "' is missing" + fix);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  if (bytes.size() != expected.bytes)
    throw std::runtime_error("checkpoint file '" + path.string() + "' is corrupt: " +
                             std::to_string(bytes.size()) + " bytes, meta.json records " +
                             std::to_string(expected.bytes) + fix);
  std::uint32_t crc = crc32(bytes.data(), bytes.size());
  if (crc != expected.crc32) {
    char msg[96];
    std::snprintf(msg, sizeof msg, "CRC32 %08x, meta.json records %08x", crc, expected.crc32);
    throw std::runtime_error("checkpoint file '" + path.string() + "' is corrupt: " + msg + fix);
  }
  std::uint32_t version = 0, unit = 0;
  std::uint64_t n = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&unit, bytes.data() + 12, 4);
  std::memcpy(&n, bytes.data() + 16, 8);
  if (std::memcmp(bytes.data(), kMagic, 8) != 0 || version != kVersion ||
      static_cast<int>(unit) != expected.unit || n != expected.param_count ||
      kHeaderBytes + 3 * n * sizeof(float) != bytes.size())
    throw std::runtime_error("checkpoint file '" + path.string() +
                             "' has an unexpected header (not unit " +
                             std::to_string(expected.unit) + " of this checkpoint)" + fix);
  UnitState s;
  const std::uint8_t* p = bytes.data() + kHeaderBytes;
  for (auto* dst : {&s.params, &s.m, &s.v}) {
    dst->resize(n);
    std::memcpy(dst->data(), p, n * sizeof(float));
    p += n * sizeof(float);
  }
  return s;
}

void prune_checkpoints(const fs::path& root, int keep) {
  std::vector<std::int64_t> complete;
  std::vector<std::pair<std::int64_t, fs::path>> all;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    auto step = parse_step_folder(entry.path().filename().string());
    if (!step) continue;
    all.emplace_back(*step, entry.path());
    if (is_complete(entry.path())) complete.push_back(*step);
  }
  if (complete.empty()) return;
  std::sort(complete.begin(), complete.end());
  std::int64_t newest = complete.back();
  std::int64_t oldest_kept =
      complete[complete.size() > static_cast<std::size_t>(std::max(keep, 1))
                   ? complete.size() - static_cast<std::size_t>(std::max(keep, 1))
                   : 0];
  for (const auto& [step, path] : all) {
    bool done = is_complete(path);
    if ((done && step < oldest_kept) || (!done && step < newest)) fs::remove_all(path, ec);
  }
}

void maybe_pause_for_test(std::int64_t step, int files_written) {
  const char* spec = std::getenv("FLOTILLA_TEST_CKPT_PAUSE");
  if (spec == nullptr) return;
  long long at_step = -1, at_files = -1, ms = 0;
  if (std::sscanf(spec, "%lld:%lld:%lld", &at_step, &at_files, &ms) != 3) return;
  if (at_step != step || at_files != files_written) return;
  // Sleeps in slices so a SIGTERM from the launcher (after a peer died) ends the pause early.
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < until && !process::stop_requested())
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace flotilla::worker
