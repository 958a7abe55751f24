#include "kube/net/connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <mutex>

namespace flotilla::kube::net {
namespace {

void process_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::signal(SIGPIPE, SIG_IGN);
    OPENSSL_init_ssl(0, nullptr);
  });
}

std::string ssl_error_text() {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text.empty() ? "unknown TLS error" : text;
}

bool load_pem_certs_into_store(X509_STORE* store, const std::string& pem, std::string* error) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr)) {
    X509_STORE_add_cert(store, cert);
    X509_free(cert);
    ++count;
  }
  ERR_clear_error();
  BIO_free(bio);
  if (count == 0) {
    *error = "no PEM certificate found in the CA data";
    return false;
  }
  return true;
}

bool use_cert_and_key(SSL_CTX* ctx, const std::string& cert_pem, const std::string& key_pem,
                      std::string* error) {
  BIO* bio = BIO_new_mem_buf(cert_pem.data(), static_cast<int>(cert_pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  bool ok = cert && SSL_CTX_use_certificate(ctx, cert) == 1;
  X509_free(cert);
  // Any further certificates in the PEM are the chain.
  while (ok) {
    X509* extra = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
    if (!extra) break;
    SSL_CTX_add_extra_chain_cert(ctx, extra);
  }
  ERR_clear_error();
  BIO_free(bio);
  if (!ok) {
    *error = "certificate PEM does not load: " + ssl_error_text();
    return false;
  }
  bio = BIO_new_mem_buf(key_pem.data(), static_cast<int>(key_pem.size()));
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ok = key && SSL_CTX_use_PrivateKey(ctx, key) == 1 && SSL_CTX_check_private_key(ctx) == 1;
  EVP_PKEY_free(key);
  if (!ok) {
    *error = "private key PEM does not load or does not match the certificate: " + ssl_error_text();
    return false;
  }
  return true;
}

bool set_nonblocking(int fd) {
  int flags = fcntl(fd, F_GETFL, 0);
  return flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
}

bool is_ip_literal(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

SSL_CTX* new_ssl_ctx(const SSL_METHOD* method, std::string* error) {
  process_init();
  SSL_CTX* ctx = SSL_CTX_new(method);
  if (!ctx) {
    *error = ssl_error_text();
    return nullptr;
  }
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  return ctx;
}

}  // namespace

std::shared_ptr<TlsContext> TlsContext::client(const TlsClientOptions& options, std::string* error) {
  SSL_CTX* ctx = new_ssl_ctx(TLS_client_method(), error);
  if (!ctx) return nullptr;
  std::shared_ptr<TlsContext> holder(new TlsContext(ctx, false));
  if (options.insecure_skip_verify) {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
  } else {
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
    if (options.ca_pem.empty()) {
      SSL_CTX_set_default_verify_paths(ctx);
    } else if (!load_pem_certs_into_store(SSL_CTX_get_cert_store(ctx), options.ca_pem, error)) {
      return nullptr;
    }
  }
  if (!options.client_cert_pem.empty() &&
      !use_cert_and_key(ctx, options.client_cert_pem, options.client_key_pem, error)) {
    return nullptr;
  }
  return holder;
}

std::shared_ptr<TlsContext> TlsContext::server(const TlsServerOptions& options, std::string* error) {
  SSL_CTX* ctx = new_ssl_ctx(TLS_server_method(), error);
  if (!ctx) return nullptr;
  std::shared_ptr<TlsContext> holder(new TlsContext(ctx, true));
  if (!use_cert_and_key(ctx, options.cert_pem, options.key_pem, error)) return nullptr;
  if (!options.client_ca_pem.empty()) {
    if (!load_pem_certs_into_store(SSL_CTX_get_cert_store(ctx), options.client_ca_pem, error))
      return nullptr;
    // Ask for a client certificate but allow bearer-token clients without one.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  return holder;
}

TlsContext::~TlsContext() { SSL_CTX_free(static_cast<SSL_CTX*>(ctx_)); }

IoStatus Connection::wait(short events, Millis timeout) const {
  pollfd p{fd_, events, 0};
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (shut_.load()) return IoStatus::closed;
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    if (left.count() < 0) return IoStatus::timeout;
    // Short slices so that shutdown() from another thread is noticed even if poll misses it.
    int slice = static_cast<int>(std::min<long long>(left.count(), 250));
    int r = ::poll(&p, 1, slice);
    if (r > 0) return IoStatus::ok;
    if (r < 0 && errno != EINTR) return IoStatus::error;
  }
}

std::unique_ptr<Connection> Connection::connect(const std::string& host, int port,
                                                const std::shared_ptr<TlsContext>& tls,
                                                Millis timeout, std::string* error) {
  process_init();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string port_text = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_text.c_str(), &hints, &res); rc != 0) {
    *error = "cannot resolve " + host + ": " + gai_strerror(rc);
    return nullptr;
  }
  int fd = -1;
  std::string last_error = "no address for " + host;
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    set_nonblocking(fd);
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (rc == 1) {
        int so_error = 0;
        socklen_t len = sizeof so_error;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
        rc = so_error == 0 ? 0 : -1;
        errno = so_error;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) break;
    last_error = "cannot connect to " + host + ":" + port_text + ": " + std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    *error = last_error;
    return nullptr;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!tls) return std::unique_ptr<Connection>(new Connection(fd, nullptr));

  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(tls->native()));
  SSL_set_fd(ssl, fd);
  if (is_ip_literal(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl, host.c_str());
    SSL_set1_host(ssl, host.c_str());
  }
  std::unique_ptr<Connection> conn(new Connection(fd, ssl));
  if (IoStatus st = conn->handshake(true, timeout); st != IoStatus::ok) {
    long verify = SSL_get_verify_result(ssl);
    *error = "TLS handshake with " + host + ":" + port_text + " failed: " +
             (verify != X509_V_OK ? std::string("certificate verify failed: ") + X509_verify_cert_error_string(verify)
                                  : st == IoStatus::timeout ? "timeout" : ssl_error_text());
    ERR_clear_error();
    return nullptr;
  }
  return conn;
}

std::unique_ptr<Connection> Connection::adopt_fd(int fd, const std::shared_ptr<TlsContext>& tls) {
  process_init();
  set_nonblocking(fd);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (!tls) return std::unique_ptr<Connection>(new Connection(fd, nullptr));
  SSL* ssl = SSL_new(static_cast<SSL_CTX*>(tls->native()));
  SSL_set_fd(ssl, fd);
  return std::unique_ptr<Connection>(new Connection(fd, ssl));
}

IoStatus Connection::server_handshake(Millis timeout, std::string* error) {
  if (!ssl_) return IoStatus::ok;
  IoStatus st = handshake(false, timeout);
  if (st != IoStatus::ok) {
    *error = "TLS accept failed: " + (st == IoStatus::timeout ? std::string("timeout") : ssl_error_text());
    ERR_clear_error();
  }
  return st;
}

IoStatus Connection::handshake(bool client, Millis timeout) {
  SSL* ssl = static_cast<SSL*>(ssl_);
  for (;;) {
    int rc = client ? SSL_connect(ssl) : SSL_accept(ssl);
    if (rc == 1) return IoStatus::ok;
    int err = SSL_get_error(ssl, rc);
    IoStatus st = IoStatus::error;
    if (err == SSL_ERROR_WANT_READ) st = wait(POLLIN, timeout);
    else if (err == SSL_ERROR_WANT_WRITE) st = wait(POLLOUT, timeout);
    if (st != IoStatus::ok) return st;
  }
}

Connection::~Connection() {
  if (ssl_) {
    SSL* ssl = static_cast<SSL*>(ssl_);
    if (!shut_.load()) SSL_shutdown(ssl);  // best effort close_notify; non-blocking
    SSL_free(ssl);
    ERR_clear_error();
  }
  if (fd_ >= 0) ::close(fd_);
}

IoStatus Connection::read_some(char* out, size_t capacity, size_t* n, Millis timeout) {
  if (!ssl_) {
    for (;;) {
      if (shut_.load()) return IoStatus::closed;
      ssize_t r = ::recv(fd_, out, capacity, 0);
      if (r > 0) {
        *n = static_cast<size_t>(r);
        return IoStatus::ok;
      }
      if (r == 0) return shut_.load() ? IoStatus::closed : IoStatus::eof;
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return shut_.load() ? IoStatus::closed : IoStatus::error;
      if (IoStatus st = wait(POLLIN, timeout); st != IoStatus::ok) return st;
    }
  }
  SSL* ssl = static_cast<SSL*>(ssl_);
  for (;;) {
    if (shut_.load()) return IoStatus::closed;
    size_t got = 0;
    int rc = SSL_read_ex(ssl, out, capacity, &got);
    if (rc == 1) {
      *n = got;
      return IoStatus::ok;
    }
    int err = SSL_get_error(ssl, rc);
    IoStatus st;
    if (err == SSL_ERROR_WANT_READ) st = wait(POLLIN, timeout);
    else if (err == SSL_ERROR_WANT_WRITE) st = wait(POLLOUT, timeout);
    else {
      ERR_clear_error();
      if (shut_.load()) return IoStatus::closed;
      return (err == SSL_ERROR_ZERO_RETURN || err == SSL_ERROR_SYSCALL) ? IoStatus::eof : IoStatus::error;
    }
    if (st != IoStatus::ok) return st;
  }
}

IoStatus Connection::write_all(std::string_view data, Millis timeout) {
  size_t done = 0;
  while (done < data.size()) {
    if (shut_.load()) return IoStatus::closed;
    if (!ssl_) {
      ssize_t r = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        if (IoStatus st = wait(POLLOUT, timeout); st != IoStatus::ok) return st;
        continue;
      }
      return IoStatus::error;
    }
    SSL* ssl = static_cast<SSL*>(ssl_);
    size_t wrote = 0;
    int rc = SSL_write_ex(ssl, data.data() + done, data.size() - done, &wrote);
    if (rc == 1) {
      done += wrote;
      continue;
    }
    int err = SSL_get_error(ssl, rc);
    IoStatus st;
    if (err == SSL_ERROR_WANT_WRITE) st = wait(POLLOUT, timeout);
    else if (err == SSL_ERROR_WANT_READ) st = wait(POLLIN, timeout);
    else {
      ERR_clear_error();
      return shut_.load() ? IoStatus::closed : IoStatus::error;
    }
    if (st != IoStatus::ok) return st;
  }
  return IoStatus::ok;
}

bool Connection::peer_closed() const {
  if (shut_.load()) return true;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (::poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return true;
  if (!ssl_ && (p.revents & POLLIN)) {
    char c;
    return ::recv(fd_, &c, 1, MSG_PEEK) == 0;
  }
  return false;
}

void Connection::shutdown() {
  if (shut_.exchange(true)) return;
  ::shutdown(fd_, SHUT_RDWR);
}

std::string Connection::peer_address() const {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "";
  char host[INET6_ADDRSTRLEN] = {0};
  int port = 0;
  if (ss.ss_family == AF_INET) {
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (ss.ss_family == AF_INET6) {
    auto* a = reinterpret_cast<sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string Connection::peer_common_name() const {
  if (!ssl_) return "";
  SSL* ssl = static_cast<SSL*>(ssl_);
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (!cert) return "";
  std::string cn;
  if (SSL_get_verify_result(ssl) == X509_V_OK) {
    char buf[256] = {0};
    if (X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, buf, sizeof buf) > 0)
      cn = buf;
  }
  X509_free(cert);
  return cn;
}

}  // namespace flotilla::kube::net
