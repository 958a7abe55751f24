#include "kube/net/x509.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include <memory>

namespace flotilla::kube::net {
namespace {

struct Deleter {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(BIO* p) const { BIO_free(p); }
};
template <class T>
using Owned = std::unique_ptr<T, Deleter>;

std::string bio_text(BIO* bio) {
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  return std::string(data, static_cast<size_t>(n));
}

std::string pem_of(X509* cert) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_X509(bio.get(), cert);
  return bio_text(bio.get());
}

std::string pem_of(EVP_PKEY* key) {
  Owned<BIO> bio(BIO_new(BIO_s_mem()));
  PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr);
  return bio_text(bio.get());
}

bool add_ext(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return false;
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return true;
}

Owned<X509> new_cert(EVP_PKEY* key, const std::string& cn, const std::vector<std::string>& orgs,
                     int valid_days) {
  Owned<X509> cert(X509_new());
  X509_set_version(cert.get(), 2);
  unsigned char serial_bytes[16];
  RAND_bytes(serial_bytes, sizeof serial_bytes);
  serial_bytes[0] &= 0x7f;
  BIGNUM* serial = BN_bin2bn(serial_bytes, sizeof serial_bytes, nullptr);
  BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(cert.get()));
  BN_free(serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 60L * 60 * 24 * valid_days);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  for (const auto& o : orgs)
    X509_NAME_add_entry_by_txt(name, "O", MBSTRING_UTF8,
                               reinterpret_cast<const unsigned char*>(o.c_str()), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0);
  return cert;
}

std::string fail(std::string* error, const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = {0};
  if (e) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  *error = what + (e ? std::string(": ") + buf : "");
  return {};
}

}  // namespace

PemPair issue_self_signed_ca(const std::string& common_name, int valid_days, std::string* error) {
  Owned<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return {fail(error, "EC key generation failed"), ""};
  auto cert = new_cert(key.get(), common_name, {}, valid_days);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(cert.get()));
  if (!add_ext(cert.get(), cert.get(), NID_basic_constraints, "critical,CA:TRUE") ||
      !add_ext(cert.get(), cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature") ||
      !add_ext(cert.get(), cert.get(), NID_subject_key_identifier, "hash"))
    return {fail(error, "CA extensions"), ""};
  if (X509_sign(cert.get(), key.get(), EVP_sha256()) <= 0) return {fail(error, "CA signing"), ""};
  return {pem_of(cert.get()), pem_of(key.get())};
}

PemPair issue_leaf(const PemPair& ca, const LeafSpec& spec, std::string* error) {
  Owned<BIO> cbio(BIO_new_mem_buf(ca.cert_pem.data(), static_cast<int>(ca.cert_pem.size())));
  Owned<X509> ca_cert(PEM_read_bio_X509(cbio.get(), nullptr, nullptr, nullptr));
  Owned<BIO> kbio(BIO_new_mem_buf(ca.key_pem.data(), static_cast<int>(ca.key_pem.size())));
  Owned<EVP_PKEY> ca_key(PEM_read_bio_PrivateKey(kbio.get(), nullptr, nullptr, nullptr));
  if (!ca_cert || !ca_key) return {fail(error, "CA certificate or key PEM does not load"), ""};
  Owned<EVP_PKEY> key(EVP_EC_gen("P-256"));
  if (!key) return {fail(error, "EC key generation failed"), ""};
  auto cert = new_cert(key.get(), spec.common_name, spec.organizations, spec.valid_days);
  X509_set_issuer_name(cert.get(), X509_get_subject_name(ca_cert.get()));
  std::string san;
  for (const auto& d : spec.dns_names) san += (san.empty() ? "" : ",") + std::string("DNS:") + d;
  for (const auto& ip : spec.ip_addresses) san += (san.empty() ? "" : ",") + std::string("IP:") + ip;
  bool ok = add_ext(cert.get(), ca_cert.get(), NID_basic_constraints, "critical,CA:FALSE") &&
            add_ext(cert.get(), ca_cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment") &&
            add_ext(cert.get(), ca_cert.get(), NID_ext_key_usage, "serverAuth,clientAuth") &&
            add_ext(cert.get(), ca_cert.get(), NID_authority_key_identifier, "keyid:always") &&
            (san.empty() || add_ext(cert.get(), ca_cert.get(), NID_subject_alt_name, san));
  if (!ok) return {fail(error, "leaf extensions"), ""};
  if (X509_sign(cert.get(), ca_key.get(), EVP_sha256()) <= 0) return {fail(error, "leaf signing"), ""};
  return {pem_of(cert.get()), pem_of(key.get())};
}

}  // namespace flotilla::kube::net
