// RapidCheck generators for ids, text, opaque bytes and records (shared by the records suite).
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/records.hpp"
#include "etlc/split.hpp"

namespace etlc::testgen {

// UTF-8 bytes of one Unicode scalar value (the caller passes no surrogates).
inline std::string utf8(std::uint32_t cp) {
  std::string out;
  if (cp < 0x80U) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800U) {
    out.push_back(static_cast<char>(0xC0U | (cp >> 6U)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  } else if (cp < 0x10000U) {
    out.push_back(static_cast<char>(0xE0U | (cp >> 12U)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  } else {
    out.push_back(static_cast<char>(0xF0U | (cp >> 18U)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 12U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | ((cp >> 6U) & 0x3FU)));
    out.push_back(static_cast<char>(0x80U | (cp & 0x3FU)));
  }
  return out;
}

// Unicode scalar values, biased towards the bytes the key encoding treats specially.
inline rc::Gen<std::uint32_t> code_point() {
  return rc::gen::oneOf(
      rc::gen::element<std::uint32_t>('a', 'Z', '7', '_', '-', '.', '=', '/', ' ', '\0', '\n', '"',
                                      '\\', 0x7F),
      rc::gen::inRange<std::uint32_t>(0x00, 0x80), rc::gen::inRange<std::uint32_t>(0x80, 0x800),
      rc::gen::suchThat(rc::gen::inRange<std::uint32_t>(0x800, 0x10000),
                        [](std::uint32_t c) { return c < 0xD800U || c > 0xDFFFU; }),
      rc::gen::inRange<std::uint32_t>(0x10000, 0x110000),
      rc::gen::element<std::uint32_t>(0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10FFFF));
}

// Valid UTF-8 text of any length the size parameter allows (possibly empty).
inline rc::Gen<std::string> text() {
  return rc::gen::map(rc::gen::container<std::vector<std::uint32_t>>(code_point()),
                      [](const std::vector<std::uint32_t>& cps) {
                        std::string s;
                        for (auto cp : cps) s += utf8(cp);
                        return s;
                      });
}

// Valid ids: non-empty UTF-8 of at most kMaxSplitIdBytes bytes (whole code points only).
inline rc::Gen<std::string> id() {
  return rc::gen::map(
      rc::gen::nonEmpty(rc::gen::container<std::vector<std::uint32_t>>(code_point())),
      [](const std::vector<std::uint32_t>& cps) {
        std::string s;
        for (auto cp : cps) {
          std::string piece = utf8(cp);
          if (s.size() + piece.size() > kMaxSplitIdBytes) break;
          s += piece;
        }
        return s;
      });
}

// Arbitrary bytes (every value 0..255 possible).
inline rc::Gen<std::string> bytes() {
  return rc::gen::map(
      rc::gen::container<std::vector<std::uint8_t>>(rc::gen::arbitrary<std::uint8_t>()),
      [](const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); });
}

// 64-bit values including the extremes JSON libraries get wrong.
inline rc::Gen<std::uint64_t> u64() {
  constexpr auto kMax = std::numeric_limits<std::uint64_t>::max();
  return rc::gen::oneOf(
      rc::gen::arbitrary<std::uint64_t>(),
      rc::gen::element<std::uint64_t>(0, 1, kMax, kMax - 1, (std::uint64_t{1} << 53) + 1,
                                      std::uint64_t{1} << 63));
}

inline rc::Gen<std::uint32_t> u32() {
  constexpr auto kMax = std::numeric_limits<std::uint32_t>::max();
  return rc::gen::oneOf(rc::gen::arbitrary<std::uint32_t>(),
                        rc::gen::element<std::uint32_t>(0, 1, kMax));
}

template <typename T>
std::optional<T> maybe(const rc::Gen<T>& gen) {
  if (*rc::gen::arbitrary<bool>()) return *gen;
  return std::nullopt;
}

template <typename Enum>
Enum any_of(std::initializer_list<Enum> values) {
  return *rc::gen::elementOf(std::vector<Enum>(values));
}

// --- records (call inside a property: they draw with operator*) -------------------------------

inline core::LeaderRecord leader_record() {
  return {*id(), *text(), *u64()};
}

inline core::PlanRecord plan_record() {
  core::PlanRecord r;
  r.fingerprint = *text();
  r.term = *u64();
  r.finality = any_of({core::Finality::open, core::Finality::final});
  r.planned = *rc::gen::arbitrary<bool>();
  r.split_count = *u64();
  r.cursor = maybe(text());
  r.completed = *u64();
  r.quarantined = *u64();
  r.verdict = any_of({core::Verdict::running, core::Verdict::complete, core::Verdict::stalled,
                      core::Verdict::failed});
  r.message = maybe(text());
  return r;
}

inline core::SpecRecord spec_record() {
  return core::SpecRecord{SplitSpec{*id(), *bytes(), *u64()}};
}

inline core::SplitRecord split_record() {
  core::SplitRecord r;
  r.id = *id();
  r.epoch = *u64();
  r.status = any_of(
      {core::SplitStatus::runnable, core::SplitStatus::completed, core::SplitStatus::quarantined});
  r.owner = maybe(id());
  r.owner_nonce = maybe(text());
  r.attempts = *u32();
  r.weight = *u64();
  r.progress.watermark = *u64();
  r.progress.state = *bytes();
  r.progress.done = maybe(u64());
  r.last_error = maybe(text());
  return r;
}

inline core::LeaseRecord lease_record() {
  return {*id(), *id(), *text(), *u64()};
}

inline core::MemberRecord member_record() {
  return {*id(), *text(), *text(), *u32(), *u64(), *u64()};
}

inline core::AssignmentRecord assignment_record() {
  core::AssignmentRecord r;
  r.instance = *id();
  r.term = *u64();
  auto ids = *rc::gen::container<std::set<std::string>>(id());
  r.splits.assign(ids.begin(), ids.end());  // std::set orders bytewise, as the codec requires
  return r;
}

inline core::CordonRecord cordon_record() {
  return {*id(), *text()};
}

inline core::PauseRecord pause_record() {
  return {*text(), *text(), *u64()};
}

}  // namespace etlc::testgen
