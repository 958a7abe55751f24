// Issuing X.509 certificates with OpenSSL: a self-signed CA and leaf certificates it signs.
//
// Guarantees: keys are ECDSA P-256; leaf certificates carry the given DNS names and IP
//   addresses as subjectAltNames and both serverAuth and clientAuth usages, so one issuer
//   serves a TLS server and its mutual-TLS clients. Output is PEM text.
// Assumes: callers store the key PEM privately (0600); nothing here touches the file system.
// Caveats: for local clusters and tests, not a PKI: no revocation, no name constraints.
#pragma once

#include <string>
#include <vector>

namespace flotilla::kube::net {

struct PemPair {
  std::string cert_pem;
  std::string key_pem;
};

struct LeafSpec {
  std::string common_name;
  std::vector<std::string> dns_names;
  std::vector<std::string> ip_addresses;
  std::vector<std::string> organizations;  // O= (Kubernetes maps it to groups)
  int valid_days = 3650;
};

// Empty PemPair and *error set when OpenSSL fails.
PemPair issue_self_signed_ca(const std::string& common_name, int valid_days, std::string* error);
PemPair issue_leaf(const PemPair& ca, const LeafSpec& spec, std::string* error);

}  // namespace flotilla::kube::net
