// describe_api_error() and ApiErrorReporter: what the operator's log says about a refused request.
#include "operator/api_errors.h"

#include <gtest/gtest.h>

#include <cstdio>

namespace fo = flotilla::op;

namespace {
std::string contents(std::FILE* f) {
  std::rewind(f);
  std::string out;
  char buf[512];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, f)) out.append(buf, n);
  return out;
}

flotilla::kube::Error forbidden(const std::string& verb) {
  return flotilla::kube::error_from_response(
      403, R"({"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"pods is forbidden: User \"system:serviceaccount:flotilla-system:flotilla\" cannot )" +
               verb + R"( resource \"pods\" in API group \"\" in the namespace \"team\""})");
}
}  // namespace

TEST(ApiErrors, AForbiddenRequestNamesTheRequestThePermissionAndTheChart) {
  const std::string line = fo::describe_api_error("create pods in team", forbidden("create"));
  EXPECT_EQ(line.rfind("forbidden: create pods in team (HTTP 403): pods is forbidden: User "
                       "\"system:serviceaccount:flotilla-system:flotilla\" cannot create resource \"pods\"",
                       0),
            0u)
      << line;
  EXPECT_NE(line.find("lacks this RBAC permission"), std::string::npos);
  EXPECT_NE(line.find("docs/install.md"), std::string::npos);
  const std::string transient =
      fo::describe_api_error("list/watch nodes", flotilla::kube::transport_error("connection refused"));
  EXPECT_EQ(transient, "transient: list/watch nodes: connection refused");
}

TEST(ApiErrors, ARepeatedFailureIsLoggedOnceAndCountedEveryTime) {
  fo::Metrics metrics;
  std::FILE* log = std::tmpfile();
  ASSERT_NE(log, nullptr);
  fo::ApiErrorReporter reporter(metrics, log);
  for (int i = 0; i < 3; ++i) reporter.report("create pods in team", forbidden("create"));
  reporter.report("patch pods in team", forbidden("patch"));
  std::string text = contents(log);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;
  EXPECT_EQ(metrics.value("flotilla_api_errors_total", {{"kind", "Forbidden"}}), 4);
  // Once it worked again, the next failure is news.
  reporter.recovered("create pods in team");
  reporter.report("create pods in team", forbidden("create"));
  text = contents(log);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3) << text;
  std::fclose(log);
}
