// The handler behind ETLC_ASSERT (core/protocol_assert.hpp). Outside core/: it does I/O.
#include "core/protocol_assert.hpp"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "log.hpp"

namespace etlc::core {
namespace {

void log_and_abort(const AssertFailure& f) {
  const std::string text = fmt::format("etlc: protocol assertion failed at {}:{}: {} ({})", f.file,
                                       f.line, f.message, f.expression);
  log().error("{}", text);
  std::fprintf(stderr, "%s\n", text.c_str());
  std::abort();
}

std::atomic<AssertHandler> g_handler{nullptr};

}  // namespace

AssertHandler set_assert_handler(AssertHandler handler) {
  return g_handler.exchange(handler);
}

void assert_failed(const char* expression, const char* file, int line, std::string message) {
  const AssertFailure failure{expression, file, line, std::move(message)};
  const AssertHandler handler = g_handler.load();
  (handler != nullptr ? handler : log_and_abort)(failure);
}

}  // namespace etlc::core
