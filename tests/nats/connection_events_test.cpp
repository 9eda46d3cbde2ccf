// The registry through which nats.c's connection callbacks reach a store's ConnectionEvents
// (src/store/nats/connection_events.hpp): once close() unregistered a closure it names nothing,
// so a callback nats.c delivers after the closed callback finds nothing to touch. No server.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>

#include "store/nats/connection_events.hpp"

namespace etlc::nats_detail {
namespace {

using namespace std::chrono_literals;

TEST(ConnectionEvents, AClosureNamesItsEventsUntilUnregistered) {
  auto events = std::make_shared<ConnectionEvents>();
  void* closure = register_events(events);
  ASSERT_NE(closure, nullptr);
  EXPECT_EQ(find_events(closure), events);

  unregister_events(closure);
  EXPECT_EQ(find_events(closure), nullptr);
  EXPECT_EQ(events.use_count(), 1) << "the registry still holds the events";
  unregister_events(closure);  // again: ignored
  unregister_events(nullptr);
  EXPECT_EQ(find_events(nullptr), nullptr);
}

TEST(ConnectionEvents, AClosureIsNeverReused) {
  void* first = register_events(std::make_shared<ConnectionEvents>());
  unregister_events(first);
  auto second_events = std::make_shared<ConnectionEvents>();
  void* second = register_events(second_events);
  EXPECT_NE(second, first);
  EXPECT_EQ(find_events(first), nullptr) << "a late callback of the first would reach the second";
  EXPECT_EQ(find_events(second), second_events);
  unregister_events(second);
}

TEST(ConnectionEvents, WaitClosedReturnsOnceMarkedAndOtherwiseAtItsBound) {
  ConnectionEvents events;
  EXPECT_FALSE(events.wait_closed(1ms));
  std::thread closer([&] { events.mark_closed(); });
  EXPECT_TRUE(events.wait_closed(60s));
  closer.join();
  EXPECT_TRUE(events.wait_closed(0ms)) << "closed stays closed";
}

}  // namespace
}  // namespace etlc::nats_detail
