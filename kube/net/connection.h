// A byte stream over TCP, optionally wrapped in TLS (OpenSSL), client or server side.
//
// Guarantees: every blocking call takes a timeout; shutdown() may be called from any thread and
//   wakes a thread blocked in read_some()/write_all() on the same connection (that is how HTTP
//   streams are cancelled and how a server stops). TLS clients verify the peer against the CA
//   by default (chain + host name or IP); TLS contexts are immutable and shareable.
// Assumes: one thread reads and writes a given connection at a time (shutdown() excepted).
// Caveats: SIGPIPE is ignored process-wide the first time a connection is made, since OpenSSL
//   writes through write(2); the shells that use this layer never rely on SIGPIPE.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace flotilla::kube::net {

using Millis = std::chrono::milliseconds;

struct TlsClientOptions {
  std::string ca_pem;            // PEM CAs to trust; empty = system default store
  std::string client_cert_pem;   // optional client certificate (mutual TLS)
  std::string client_key_pem;
  bool insecure_skip_verify = false;  // only when a kubeconfig asks for it
};

struct TlsServerOptions {
  std::string cert_pem;  // server certificate (chain)
  std::string key_pem;
  std::string client_ca_pem;  // when set, client certificates signed by it are requested/verified
};

// An OpenSSL SSL_CTX behind an opaque handle, so this header stays light.
class TlsContext {
 public:
  // nullptr and *error set when the PEM data does not load.
  static std::shared_ptr<TlsContext> client(const TlsClientOptions& options, std::string* error);
  static std::shared_ptr<TlsContext> server(const TlsServerOptions& options, std::string* error);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;
  void* native() const { return ctx_; }  // SSL_CTX*
  bool is_server() const { return server_; }

 private:
  TlsContext(void* ctx, bool server) : ctx_(ctx), server_(server) {}
  void* ctx_;
  bool server_;
};

enum class IoStatus { ok, eof, timeout, closed, error };

class Connection {
 public:
  // Connects to host:port (name or IP literal). With tls, performs the handshake and verifies
  // the server as `host`. nullptr and *error set on failure.
  static std::unique_ptr<Connection> connect(const std::string& host, int port,
                                             const std::shared_ptr<TlsContext>& tls,
                                             Millis timeout, std::string* error);
  // Adopts an accepted socket (and owns fd from here on); with a server TLS context, run
  // server_handshake() next. Two steps so a server can register the connection, and shut it
  // down when it stops, while a silent peer holds the handshake.
  static std::unique_ptr<Connection> adopt_fd(int fd, const std::shared_ptr<TlsContext>& tls);
  // The server side of the TLS handshake; ok at once for a plain socket.
  IoStatus server_handshake(Millis timeout, std::string* error);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Reads up to `capacity` bytes into `out`; *n is set to the count when ok.
  IoStatus read_some(char* out, size_t capacity, size_t* n, Millis timeout);
  IoStatus write_all(std::string_view data, Millis timeout);
  // True when the peer has closed or reset its side (checked without blocking or consuming).
  bool peer_closed() const;
  // Thread-safe: unblocks readers/writers; later I/O returns IoStatus::closed.
  void shutdown();
  bool is_shut_down() const { return shut_.load(); }
  bool is_tls() const { return ssl_ != nullptr; }
  std::string peer_address() const;
  // Subject CN of a verified client certificate ("" when none).
  std::string peer_common_name() const;

 private:
  Connection(int fd, void* ssl) : fd_(fd), ssl_(ssl) {}
  IoStatus wait(short events, Millis timeout) const;
  IoStatus handshake(bool client, Millis timeout);  // TLS handshake on a fresh connection
  int fd_;
  void* ssl_;  // SSL*
  std::atomic<bool> shut_{false};
};

}  // namespace flotilla::kube::net
