// ETLC_ASSERT (core/protocol_assert.hpp): on in test builds; a failure reaches the installed
// handler with its message, and the default handler aborts the process naming the failure.
#include <gtest/gtest.h>

#include <string>

#include "core/protocol_assert.hpp"

namespace etlc::core {
namespace {

std::string g_seen;
void remember(const AssertFailure& f) {
  g_seen = f.message + " | " + f.expression;
}

TEST(ProtocolAssert, a_failure_reaches_the_installed_handler_with_its_message) {
  const AssertHandler previous = set_assert_handler(remember);
  g_seen.clear();
  const std::uint64_t epoch = 3;
  ETLC_ASSERT(epoch >= 4, "epoch {} went back", epoch);
  EXPECT_EQ(g_seen, "epoch 3 went back | epoch >= 4");
  g_seen.clear();
  ETLC_ASSERT(epoch >= 3, "never shown {}", epoch);
  EXPECT_EQ(g_seen, "");
  set_assert_handler(previous);
}

TEST(ProtocolAssertDeathTest, the_default_handler_aborts_naming_the_failure) {
  set_assert_handler(nullptr);
  EXPECT_DEATH(ETLC_ASSERT(1 + 1 == 3, "arithmetic {}", "broke"),
               "protocol assertion failed at .*protocol_assert_test.cpp:[0-9]+: arithmetic broke");
}

}  // namespace
}  // namespace etlc::core
