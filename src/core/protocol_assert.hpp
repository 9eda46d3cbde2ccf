// ETLC_ASSERT: the protocol's local invariants, checked where they must hold (an epoch never
// decreases, a held record names this instance and nonce, a leader's term is at least the plan's,
// a lane slot moves only along its transitions, a published assignment respects lane budgets).
//
// On in every build but Release (CMake option ETLC_ASSERTIONS; the simulator's campaign build
// turns it on in Release too). A failure calls the installed handler: by default it logs the
// failure and aborts; the simulator installs one that records a finding with the seed and its
// replay command and ends the run. A handler that returns lets the caller go on (only the
// simulator should, since the run ends at its next event).
#pragma once

#include <fmt/format.h>

#include <string>
#include <utility>

namespace etlc::core {

struct AssertFailure {
  const char* expression;
  const char* file;
  int line;
  std::string message;
};

using AssertHandler = void (*)(const AssertFailure&);

// Installs `handler` for every thread (nullptr restores the default); returns the previous one.
AssertHandler set_assert_handler(AssertHandler handler);

// Reports a failure to the handler (ETLC_ASSERT calls it).
void assert_failed(const char* expression, const char* file, int line, std::string message);

template <typename... Args>
void assert_failed_fmt(const char* expression, const char* file, int line,
                       fmt::format_string<Args...> format, Args&&... args) {
  assert_failed(expression, file, line, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace etlc::core

#if !defined(ETLC_ASSERTIONS) || ETLC_ASSERTIONS
#define ETLC_ASSERT(condition, ...)                                                 \
  do {                                                                              \
    if (!(condition)) [[unlikely]]                                                  \
      ::etlc::core::assert_failed_fmt(#condition, __FILE__, __LINE__, __VA_ARGS__); \
  } while (false)
#else
#define ETLC_ASSERT(condition, ...) \
  do {                              \
    (void)sizeof(!(condition));     \
  } while (false)
#endif
