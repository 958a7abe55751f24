// ServiceAccount identities: the bearer tokens devcluster issues for ServiceAccounts, who they
// authenticate as, and the files a pod process finds its token in.
//
// Guarantees: issue() returns a JWT (HS256 over the data dir's signing key) naming the
//   ServiceAccount by namespace, name and uid, with an expiry; authenticate() accepts it only
//   when the signature holds, it has not expired, and a ServiceAccount of that namespace, name
//   and uid still exists (deleting the ServiceAccount revokes its tokens, as in Kubernetes).
//   The identity is kube-apiserver's: user `system:serviceaccount:<ns>:<name>`, groups
//   `system:serviceaccounts`, `system:serviceaccounts:<ns>`, `system:authenticated`.
// Assumes: the signing key is secret (DIR/pki/sa.key, 0600) and kept across restarts.
// Caveats: tokens are not bound to a pod (deleting the pod does not revoke them) and audiences
//   are recorded but not checked; kube-apiserver signs with RS256/ES256 and publishes the keys,
//   devcluster's tokens are only for devcluster itself.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace flotilla::devcluster {

class Store;

// Who a request is from, after authentication (and impersonation).
struct UserInfo {
  std::string name;
  std::vector<std::string> groups;
};

// The identity of a ServiceAccount, as kube-apiserver names it.
UserInfo service_account_user(const std::string& ns, const std::string& name);
// "system:serviceaccount:ns:name" → (ns, name); nullopt for any other user name.
std::optional<std::pair<std::string, std::string>> parse_service_account_user(const std::string& user);

class ServiceAccountTokens {
 public:
  explicit ServiceAccountTokens(std::string signing_key) : key_(std::move(signing_key)) {}

  std::string issue(const std::string& ns, const std::string& name, const std::string& uid, long long expires_unix,
                    const std::vector<std::string>& audiences = {}) const;
  // The ServiceAccount's identity, or nullopt when the token is not one of ours, is expired, or
  // its ServiceAccount is gone (or was recreated with another uid). Takes the store lock.
  std::optional<UserInfo> authenticate(Store& store, const std::string& token) const;

 private:
  std::string sign(const std::string& signing_input) const;
  std::string key_;
};

// The ServiceAccount object `default` for a namespace (what Kubernetes' controller creates).
nlohmann::json default_service_account(const std::string& ns);

}  // namespace flotilla::devcluster
