#include "devcluster/service_accounts.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <ctime>

#include "devcluster/api_types.h"
#include "devcluster/store.h"

namespace flotilla::devcluster {
namespace {

const std::string kPrefix = "system:serviceaccount:";

std::string base64url(const std::string& in) {
  std::string s = base64_encode(in);
  while (!s.empty() && s.back() == '=') s.pop_back();
  for (char& c : s) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return s;
}

std::string from_base64url(std::string s) {
  for (char& c : s) c = c == '-' ? '+' : c == '_' ? '/' : c;
  while (s.size() % 4) s += '=';
  return base64_decode(s);
}

}  // namespace

UserInfo service_account_user(const std::string& ns, const std::string& name) {
  return {kPrefix + ns + ":" + name, {"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}};
}

std::optional<std::pair<std::string, std::string>> parse_service_account_user(const std::string& user) {
  if (user.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::string rest = user.substr(kPrefix.size());
  auto colon = rest.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size()) return std::nullopt;
  return std::pair{rest.substr(0, colon), rest.substr(colon + 1)};
}

std::string ServiceAccountTokens::sign(const std::string& signing_input) const {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()), reinterpret_cast<const unsigned char*>(signing_input.data()),
       signing_input.size(), mac, &mac_len);
  return base64url(std::string(reinterpret_cast<char*>(mac), mac_len));
}

std::string ServiceAccountTokens::issue(const std::string& ns, const std::string& name, const std::string& uid,
                                        long long expires_unix, const std::vector<std::string>& audiences) const {
  const long long now = static_cast<long long>(std::time(nullptr));
  nlohmann::json header = {{"alg", "HS256"}, {"typ", "JWT"}, {"kid", "devcluster"}};
  nlohmann::json claims = {{"iss", "https://kubernetes.default.svc.cluster.local"},
                           {"sub", kPrefix + ns + ":" + name},
                           {"aud", audiences.empty() ? std::vector<std::string>{"https://kubernetes.default.svc.cluster.local"}
                                                     : audiences},
                           {"iat", now},
                           {"nbf", now},
                           {"exp", expires_unix},
                           {"kubernetes.io", {{"namespace", ns}, {"serviceaccount", {{"name", name}, {"uid", uid}}}}}};
  std::string input = base64url(header.dump()) + "." + base64url(claims.dump());
  return input + "." + sign(input);
}

std::optional<UserInfo> ServiceAccountTokens::authenticate(Store& store, const std::string& token) const {
  auto first = token.find('.');
  auto second = first == std::string::npos ? std::string::npos : token.find('.', first + 1);
  if (second == std::string::npos) return std::nullopt;
  const std::string input = token.substr(0, second), signature = token.substr(second + 1);
  const std::string expected = sign(input);
  if (signature.size() != expected.size() || CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) != 0)
    return std::nullopt;
  nlohmann::json claims = nlohmann::json::parse(from_base64url(token.substr(first + 1, second - first - 1)), nullptr, false);
  if (!claims.is_object() || !claims.contains("kubernetes.io")) return std::nullopt;
  if (claims.value("exp", 0LL) <= static_cast<long long>(std::time(nullptr))) return std::nullopt;
  const nlohmann::json& k = claims["kubernetes.io"];
  const std::string ns = k.value("namespace", "");
  const std::string name = k.value("/serviceaccount/name"_json_pointer, std::string());
  const std::string uid = k.value("/serviceaccount/uid"_json_pointer, std::string());
  {
    auto lock = store.lock();
    ObjectPtr sa = store.get_locked("/serviceaccounts", ns, name);
    if (!sa || (*sa)["metadata"].value("uid", "") != uid) return std::nullopt;
  }
  return service_account_user(ns, name);
}

nlohmann::json default_service_account(const std::string& ns) {
  return {{"apiVersion", "v1"}, {"kind", "ServiceAccount"}, {"metadata", {{"name", "default"}, {"namespace", ns}}}};
}

}  // namespace flotilla::devcluster
