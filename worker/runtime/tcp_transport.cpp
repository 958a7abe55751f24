#include "worker/runtime/tcp_transport.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace flotilla::worker {
namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error(what + ": " + std::strerror(errno));
}

using Clock = std::chrono::steady_clock;

std::string seconds_text(std::chrono::milliseconds d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", static_cast<double>(d.count()) / 1000.0);
  return buf;
}

struct PeerClosed : std::runtime_error {
  PeerClosed() : std::runtime_error("the peer closed its connection") {}
};

// Throws "timed out" (as std::system_error-free runtime_error) when the peer stops draining
// the socket for SO_SNDTIMEO; the caller adds who the peer is.
void write_all(int fd, const void* data, std::size_t size) {
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        throw std::runtime_error("timed out: the peer stopped reading (hung or stopped?)");
      // A peer that died closes its socket: say so as a receive does, whichever of the two
      // this rank happened to be doing when it noticed.
      if (errno == EPIPE || errno == ECONNRESET) throw PeerClosed();
      fail("socket send failed");
    }
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

enum class ReadStatus { kOk, kClosed, kTimedOut };

// Reads exactly `size` bytes before `deadline`. kClosed: the peer closed (or reset) the
// connection before the first byte; closing in the middle of a message throws.
ReadStatus read_all_until(int fd, void* data, std::size_t size, Clock::time_point deadline) {
  auto* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    // poll() is never restarted after a signal (a SIGTERM asking for a checkpoint must not
    // fail the receive), so retry on EINTR against the original deadline.
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    pollfd pfd{fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30)));
    if (r < 0) {
      if (errno == EINTR) continue;
      fail("poll() failed");
    }
    if (r == 0) return ReadStatus::kTimedOut;
    ssize_t n = ::recv(fd, p + got, size - got, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno == ECONNRESET)) {
      if (got == 0) return ReadStatus::kClosed;
      throw std::runtime_error("connection closed in the middle of a message");
    }
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      fail("socket recv failed");
    }
    got += static_cast<std::size_t>(n);
  }
  return ReadStatus::kOk;
}

// Rendezvous reads: a timeout or a hang-up is an error saying what was awaited.
void read_rendezvous(int fd, void* data, std::size_t size, std::chrono::milliseconds timeout,
                     const std::string& what) {
  switch (read_all_until(fd, data, size, Clock::now() + timeout)) {
    case ReadStatus::kOk: return;
    case ReadStatus::kClosed: throw std::runtime_error("rendezvous: " + what + ": peer hung up");
    case ReadStatus::kTimedOut:
      throw std::runtime_error("rendezvous timed out after " + seconds_text(timeout) +
                               " waiting for " + what +
                               " (raise --connect-timeout / FLOTILLA_CONNECT_TIMEOUT_S if ranks "
                               "start slowly)");
  }
}

void set_send_timeout(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

sockaddr_in resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr)
    throw std::runtime_error("cannot resolve MASTER_ADDR '" + host + "'");
  sockaddr_in addr = *reinterpret_cast<sockaddr_in*>(res->ai_addr);
  ::freeaddrinfo(res);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  return addr;
}

// Loopback jobs listen on 127.0.0.1 only; multi-host jobs on every interface.
int listen_on(bool loopback, int port, int backlog) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket() failed");
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(loopback ? INADDR_LOOPBACK : INADDR_ANY);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const std::string host = loopback ? "127.0.0.1" : "0.0.0.0";
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    fail("cannot listen on " + host + ":" + std::to_string(port));
  }
  if (::listen(fd, backlog) != 0) fail("listen() failed");
  return fd;
}

int bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.sin_port);
}

int accept_within(int listen_fd, std::chrono::milliseconds timeout, const std::string& who) {
  // poll() is never restarted after a signal (SIGTERM during start-up must not fail the
  // rendezvous), so retry on EINTR against the original deadline.
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int r = 0;
  do {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd p{listen_fd, POLLIN, 0};
    r = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
  } while (r < 0 && errno == EINTR);
  if (r == 0)
    throw std::runtime_error("rendezvous timed out after " + seconds_text(timeout) +
                             " waiting for " + who +
                             " (did every rank start? raise --connect-timeout / "
                             "FLOTILLA_CONNECT_TIMEOUT_S if they start slowly)");
  if (r < 0) fail("poll() failed");
  int fd = -1;
  do {
    fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) fail("accept() failed");
  set_nodelay(fd);
  return fd;
}

int connect_retrying(sockaddr_in addr, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char host[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &addr.sin_addr, host, sizeof host);
  const int port = ntohs(addr.sin_port);
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket() failed");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      set_nodelay(fd);
      return fd;
    }
    ::close(fd);
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("rendezvous timed out after " + seconds_text(timeout) +
                               " connecting to " + std::string(host) + ":" +
                               std::to_string(port) + " (is that rank running?)");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

int env_int(const char* name, int fallback, bool required) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') {
    if (required) throw std::runtime_error(std::string("environment variable ") + name +
                                           " is not set (the launcher sets RANK, WORLD_SIZE, "
                                           "MASTER_ADDR, MASTER_PORT)");
    return fallback;
  }
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (*end != '\0' || x < 0 || x > 1000000)
    throw std::runtime_error(std::string("environment variable ") + name + "='" + v +
                             "' is not a non-negative integer");
  return static_cast<int>(x);
}

std::chrono::milliseconds env_seconds(const char* name, std::chrono::milliseconds fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  double x = std::strtod(v, &end);
  if (*end != '\0' || !(x > 0.0) || x > 1e7)
    throw std::runtime_error(std::string("environment variable ") + name + "='" + v +
                             "' is not a positive number of seconds");
  return std::chrono::milliseconds(static_cast<std::int64_t>(x * 1000.0 + 0.5));
}

struct Header {
  std::uint32_t tag;
  std::uint32_t pad;
  std::uint64_t size;
};

}  // namespace

RendezvousConfig rendezvous_from_env() {
  RendezvousConfig c;
  c.rank = env_int("RANK", 0, true);
  c.world_size = env_int("WORLD_SIZE", 1, true);
  c.master_port = env_int("MASTER_PORT", 29500, c.world_size > 1);
  if (const char* a = std::getenv("MASTER_ADDR"); a != nullptr && *a != '\0') c.master_addr = a;
  c.recv_timeout = env_seconds("FLOTILLA_RECV_TIMEOUT_S", c.recv_timeout);
  c.connect_timeout = env_seconds("FLOTILLA_CONNECT_TIMEOUT_S", c.connect_timeout);
  if (c.world_size < 1) throw std::runtime_error("WORLD_SIZE must be at least 1");
  if (c.rank >= c.world_size)
    throw std::runtime_error("RANK=" + std::to_string(c.rank) + " is not below WORLD_SIZE=" +
                             std::to_string(c.world_size));
  return c;
}

struct TcpTransport::Link {
  int fd = -1;
  int peer = -1;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::vector<std::uint8_t>> queue;
  bool stopping = false;
  bool busy = false;
  std::string error;
  std::thread sender;

  void run() {
    while (true) {
      std::vector<std::uint8_t> msg;
      {
        std::unique_lock lock(mu);
        cv.wait(lock, [&] { return stopping || !queue.empty(); });
        if (queue.empty()) return;
        msg = std::move(queue.front());
        queue.pop_front();
        busy = true;
      }
      std::string err;
      if (error.empty()) {
        try {
          write_all(fd, msg.data(), msg.size());
        } catch (const PeerClosed&) {
          err = "rank " + std::to_string(peer) + " closed its connection (it exited or was killed) while this rank sent to it";
        } catch (const std::exception& e) {
          err = "sending to rank " + std::to_string(peer) + " failed: " + e.what();
        }
      }
      std::lock_guard lock(mu);
      busy = false;
      if (!err.empty()) error = err;
      cv.notify_all();
    }
  }
};

std::unique_ptr<TcpTransport> TcpTransport::connect(const RendezvousConfig& config) {
  std::unique_ptr<TcpTransport> t(new TcpTransport());
  t->rank_ = config.rank;
  t->world_size_ = config.world_size;
  const int n = config.world_size;
  const int me = config.rank;
  std::vector<int> fds(static_cast<std::size_t>(n), -1);
  if (n > 1) {
    // Every rank's listening endpoint (IPv4 address and port, network byte order), as rank 0
    // saw it: the address a peer connected from is where it can be reached.
    struct Endpoint {
      std::uint32_t addr = 0;
      std::int32_t port = 0;
    };
    std::vector<Endpoint> table(static_cast<std::size_t>(n));
    const sockaddr_in master = resolve(config.master_addr, config.master_port);
    const bool loopback = (ntohl(master.sin_addr.s_addr) >> 24) == 127;
    if (me == 0) {
      int lfd = listen_on(loopback, config.master_port, n + 8);
      table[0] = {master.sin_addr.s_addr, config.master_port};
      for (int k = 1; k < n; ++k) {
        int fd = accept_within(lfd, config.connect_timeout, "the other ranks to join");
        std::int32_t hello[2];
        read_rendezvous(fd, hello, sizeof hello, config.connect_timeout, "a joining rank's hello");
        if (hello[0] <= 0 || hello[0] >= n || fds[static_cast<std::size_t>(hello[0])] != -1)
          throw std::runtime_error("rendezvous: unexpected or duplicate rank " +
                                   std::to_string(hello[0]) + " (two jobs on one MASTER_PORT?)");
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len);
        fds[static_cast<std::size_t>(hello[0])] = fd;
        table[static_cast<std::size_t>(hello[0])] = {peer.sin_addr.s_addr, hello[1]};
      }
      ::close(lfd);
      for (int k = 1; k < n; ++k)
        write_all(fds[static_cast<std::size_t>(k)], table.data(), table.size() * sizeof(Endpoint));
    } else {
      int lfd = listen_on(loopback, 0, n + 8);
      std::int32_t hello[2] = {me, bound_port(lfd)};
      int fd0 = connect_retrying(master, config.connect_timeout);
      write_all(fd0, hello, sizeof hello);
      read_rendezvous(fd0, table.data(), table.size() * sizeof(Endpoint), config.connect_timeout,
                      "rank 0 to send the peer table");
      fds[0] = fd0;
      for (int i = 1; i < me; ++i) {
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = table[static_cast<std::size_t>(i)].addr;
        addr.sin_port = htons(static_cast<std::uint16_t>(table[static_cast<std::size_t>(i)].port));
        int fd = connect_retrying(addr, config.connect_timeout);
        std::int32_t who = me;
        write_all(fd, &who, sizeof who);
        fds[static_cast<std::size_t>(i)] = fd;
      }
      for (int k = me + 1; k < n; ++k) {
        int fd = accept_within(lfd, config.connect_timeout, "higher ranks to connect");
        std::int32_t who = -1;
        read_rendezvous(fd, &who, sizeof who, config.connect_timeout, "a higher rank's hello");
        if (who <= me || who >= n || fds[static_cast<std::size_t>(who)] != -1)
          throw std::runtime_error("rendezvous: bad hello from a peer");
        fds[static_cast<std::size_t>(who)] = fd;
      }
      ::close(lfd);
    }
  }
  t->recv_timeout_ = config.recv_timeout;
  t->links_.resize(static_cast<std::size_t>(n));
  for (int p = 0; p < n; ++p) {
    if (p == me) continue;
    set_send_timeout(fds[static_cast<std::size_t>(p)], config.recv_timeout);
    auto link = std::make_unique<Link>();
    link->fd = fds[static_cast<std::size_t>(p)];
    link->peer = p;
    Link* raw = link.get();
    link->sender = std::thread([raw] { raw->run(); });
    t->links_[static_cast<std::size_t>(p)] = std::move(link);
  }
  return t;
}

TcpTransport::~TcpTransport() {
  // Destroyed by an error (a timeout, a dead peer): unsent messages are moot, and a sender
  // blocked on a hung peer must not keep this rank from exiting, so shut the sockets first.
  const bool failing = std::uncaught_exceptions() > 0;
  for (auto& link : links_) {
    if (!link) continue;
    {
      std::lock_guard lock(link->mu);
      link->stopping = true;
      if (failing) {
        link->queue.clear();
        ::shutdown(link->fd, SHUT_RDWR);
      }
      link->cv.notify_all();
    }
    link->sender.join();
    ::shutdown(link->fd, SHUT_WR);
    ::close(link->fd);
  }
}

void TcpTransport::send(int peer, std::uint32_t tag, const void* data, std::size_t size_bytes) {
  if (peer < 0 || peer >= world_size_ || peer == rank_)
    throw std::logic_error("send to invalid peer " + std::to_string(peer));
  Link& link = *links_[static_cast<std::size_t>(peer)];
  std::vector<std::uint8_t> msg(sizeof(Header) + size_bytes);
  Header h{tag, 0, size_bytes};
  std::memcpy(msg.data(), &h, sizeof h);
  if (size_bytes > 0) std::memcpy(msg.data() + sizeof h, data, size_bytes);
  std::lock_guard lock(link.mu);
  if (!link.error.empty()) throw std::runtime_error(link.error);
  link.queue.push_back(std::move(msg));
  link.cv.notify_all();
}

std::string TcpTransport::tag_name(std::uint32_t tag) const {
  if (tag < tag_names_.size() && !tag_names_[tag].empty())
    return tag_names_[tag] + " (tag " + std::to_string(tag) + ")";
  return "a message with tag " + std::to_string(tag);
}

void TcpTransport::recv_header(int peer, std::uint32_t tag, std::uint32_t& got_tag,
                               std::uint64_t& size, Clock::time_point deadline) {
  if (peer < 0 || peer >= world_size_ || peer == rank_)
    throw std::logic_error("recv from invalid peer " + std::to_string(peer));
  Header h{};
  switch (read_all_until(links_[static_cast<std::size_t>(peer)]->fd, &h, sizeof h, deadline)) {
    case ReadStatus::kOk: break;
    case ReadStatus::kClosed:
      throw std::runtime_error("rank " + std::to_string(peer) +
                               " closed its connection (it exited or was killed) while this rank "
                               "waited for " + tag_name(tag));
    case ReadStatus::kTimedOut:
      throw std::runtime_error("timed out after " + seconds_text(recv_timeout_) +
                               " waiting for rank " + std::to_string(peer) + " to send " +
                               tag_name(tag) +
                               ": that rank is hung, stopped or unreachable (raise "
                               "--recv-timeout / FLOTILLA_RECV_TIMEOUT_S if a step legitimately "
                               "takes longer)");
  }
  got_tag = h.tag;
  size = h.size;
}

void TcpTransport::recv_body(int peer, std::uint32_t tag, void* data, std::size_t size,
                             Clock::time_point deadline) {
  if (size == 0) return;
  auto status = read_all_until(links_[static_cast<std::size_t>(peer)]->fd, data, size, deadline);
  if (status == ReadStatus::kClosed)
    throw std::runtime_error("rank " + std::to_string(peer) + " closed its connection in the "
                             "middle of " + tag_name(tag));
  if (status == ReadStatus::kTimedOut)
    throw std::runtime_error("timed out after " + seconds_text(recv_timeout_) +
                             " receiving the rest of " + tag_name(tag) + " from rank " +
                             std::to_string(peer) + " (hung or unreachable?)");
}

void TcpTransport::recv(int peer, std::uint32_t tag, void* data, std::size_t size_bytes) {
  const auto deadline = Clock::now() + recv_timeout_;
  std::uint32_t got_tag = 0;
  std::uint64_t got_size = 0;
  recv_header(peer, tag, got_tag, got_size, deadline);
  if (got_tag != tag || got_size != size_bytes)
    throw std::runtime_error("protocol error: expected tag " + std::to_string(tag) + " (" +
                             std::to_string(size_bytes) + " bytes) from rank " +
                             std::to_string(peer) + ", got tag " + std::to_string(got_tag) +
                             " (" + std::to_string(got_size) + " bytes)");
  recv_body(peer, tag, data, size_bytes, deadline);
}

std::vector<std::uint8_t> TcpTransport::recv_bytes(int peer, std::uint32_t tag) {
  const auto deadline = Clock::now() + recv_timeout_;
  std::uint32_t got_tag = 0;
  std::uint64_t got_size = 0;
  recv_header(peer, tag, got_tag, got_size, deadline);
  if (got_tag != tag)
    throw std::runtime_error("protocol error: expected tag " + std::to_string(tag) +
                             " from rank " + std::to_string(peer) + ", got tag " +
                             std::to_string(got_tag));
  std::vector<std::uint8_t> out(got_size);
  recv_body(peer, tag, out.data(), out.size(), deadline);
  return out;
}

void TcpTransport::flush() {
  for (auto& link : links_) {
    if (!link) continue;
    std::unique_lock lock(link->mu);
    const bool drained = link->cv.wait_for(lock, recv_timeout_, [&] {
      return (link->queue.empty() && !link->busy) || !link->error.empty();
    });
    if (!link->error.empty()) throw std::runtime_error(link->error);
    if (!drained)
      throw std::runtime_error("timed out after " + seconds_text(recv_timeout_) +
                               " waiting for rank " + std::to_string(link->peer) +
                               " to take queued messages (hung or stopped?)");
  }
}

}  // namespace flotilla::worker
