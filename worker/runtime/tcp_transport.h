// Point-to-point transport between the ranks of one job over TCP (loopback or a LAN).
//
// Guarantees:
//   - Rendezvous like torchrun: rank 0 listens on MASTER_PORT, every other rank connects to
//     MASTER_ADDR:MASTER_PORT and learns every rank's endpoint (the address rank 0 saw it
//     connect from, and its listening port), and a full mesh of connections is built (rank j
//     connects to each rank i < j). connect() returns once all links are up. When MASTER_ADDR
//     is a loopback address everything listens on 127.0.0.1 only; otherwise on all interfaces
//     (pods on different nodes).
//   - send() never blocks on the peer: it copies the message into a per-peer queue drained by
//     a sender thread, so schedules where two ranks send to each other before receiving (1F1B
//     stage boundaries) cannot deadlock on full socket buffers.
//   - Messages on one directed link arrive in send order. Every message carries a tag and a
//     size; recv() checks both, so a schedule bug is an error naming the tags, not silent
//     corruption.
//   - A peer that exits or is killed turns into an error on the next recv from it.
//   - Nothing waits forever. Every recv() waits at most `recv_timeout` for its whole message
//     (default 300 s, FLOTILLA_RECV_TIMEOUT_S or --recv-timeout), a send that the peer stops
//     draining fails after the same time (SO_SNDTIMEO), and every rendezvous step (accept,
//     connect, hello) at most `connect_timeout` (default 60 s, FLOTILLA_CONNECT_TIMEOUT_S or
//     --connect-timeout). A timeout is one line naming the peer rank, what was awaited (the
//     tag's name from name_tags()) and the limit. A transport destroyed while an exception is
//     in flight drops its unsent messages and shuts its sockets, so an erroring rank exits at
//     once instead of blocking on a hung peer.
// Assumes: both sides of a link agree on the order of their messages (deterministic schedules).
// Caveats: no encryption or authentication; meant for loopback and trusted pod networks.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace flotilla::worker {

struct RendezvousConfig {
  int rank = 0;
  int world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::chrono::milliseconds connect_timeout{60000};
  std::chrono::milliseconds recv_timeout{300000};
};

// Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and the optional FLOTILLA_RECV_TIMEOUT_S
// and FLOTILLA_CONNECT_TIMEOUT_S (seconds, may be fractional); throws a one-line error naming
// the missing or malformed variable.
RendezvousConfig rendezvous_from_env();

class TcpTransport {
 public:
  static std::unique_ptr<TcpTransport> connect(const RendezvousConfig& config);
  ~TcpTransport();
  TcpTransport(const TcpTransport&) = delete;
  TcpTransport& operator=(const TcpTransport&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  void send(int peer, std::uint32_t tag, const void* data, std::size_t size_bytes);
  // Receives exactly size_bytes; throws if the next message from peer has another tag or size.
  void recv(int peer, std::uint32_t tag, void* data, std::size_t size_bytes);
  // Receives a message of any size.
  std::vector<std::uint8_t> recv_bytes(int peer, std::uint32_t tag);

  template <class T>
  void send_vec(int peer, std::uint32_t tag, const std::vector<T>& v) {
    send(peer, tag, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  void recv_vec(int peer, std::uint32_t tag, std::vector<T>& v) {
    recv(peer, tag, v.data(), v.size() * sizeof(T));
  }

  // Waits until every queued send has been handed to the kernel; rethrows a send failure.
  // Fails after recv_timeout when a peer stops draining its link.
  void flush();

  // Names for tags, used in error messages ("waiting for rank 2 to send its control
  // message"); index = tag. Unnamed tags are printed as numbers.
  void name_tags(std::vector<std::string> names) { tag_names_ = std::move(names); }
  std::chrono::milliseconds recv_timeout() const { return recv_timeout_; }

 private:
  TcpTransport() = default;
  struct Link;
  void recv_header(int peer, std::uint32_t tag, std::uint32_t& got_tag, std::uint64_t& size,
                   std::chrono::steady_clock::time_point deadline);
  void recv_body(int peer, std::uint32_t tag, void* data, std::size_t size,
                 std::chrono::steady_clock::time_point deadline);
  std::string tag_name(std::uint32_t tag) const;
  int rank_ = 0;
  int world_size_ = 1;
  std::chrono::milliseconds recv_timeout_{300000};
  std::vector<std::string> tag_names_;
  std::vector<std::unique_ptr<Link>> links_;
};

}  // namespace flotilla::worker
