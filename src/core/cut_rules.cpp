#include "core/cut_rules.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "core/keys.hpp"
#include "core/repair_rules.hpp"

namespace etlc::core {

namespace {
// '~', 20 digits of epoch, '.', and the cut's number (at most kMaxChildNumber: 2 digits).
constexpr std::size_t kChildSuffixBytes = 1 + 20 + 1 + 2;
static_assert(kMaxChildrenPerSplit < kMaxChildNumber && kMaxChildNumber < 100);
}  // namespace

std::string child_split_id(std::string_view parent, std::uint64_t epoch, std::size_t n) {
  if (n == 0 || n > kMaxChildNumber) {
    throw ConfigError(fmt::format("a residual's number is 1..{}, not {}", kMaxChildNumber, n));
  }
  std::string id = fmt::format("{}~{}.{}", parent, epoch, n);
  validate_id(id, "the id of a split's residual");
  return id;
}

bool residual_id_form(std::string_view id) noexcept {
  auto digits_before = [&](std::size_t end, char mark) -> std::optional<std::size_t> {
    std::size_t i = end;
    while (i > 0 && id[i - 1] >= '0' && id[i - 1] <= '9') --i;
    if (i == end || i == 0 || id[i - 1] != mark) return std::nullopt;
    return i - 1;
  };
  const auto dot = digits_before(id.size(), '.');
  if (!dot) return false;
  const auto tilde = digits_before(*dot, '~');
  return tilde && *tilde > 0;  // a residual's parent id is never empty
}

std::optional<SplitOrigin> residual_origin(std::string_view id) {
  if (!residual_id_form(id)) return std::nullopt;
  const std::size_t tilde = id.rfind('~');
  const std::size_t dot = id.rfind('.');
  std::uint64_t epoch = 0;
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  for (char c : id.substr(tilde + 1, dot - tilde - 1)) {
    const auto digit = static_cast<std::uint64_t>(c - '0');
    if (epoch > (kMax - digit) / 10) return std::nullopt;
    epoch = epoch * 10 + digit;
  }
  return SplitOrigin{std::string(id.substr(0, tilde)), epoch};
}

SplitRecord rebuild_residual(const SplitSpec& spec, const SplitOrigin& origin, std::uint64_t epoch,
                             const SplitRecord* parent) {
  SplitRecord r;
  r.id = spec.id;
  r.epoch = epoch;
  r.weight = spec.weight;
  r.cut_from = origin;
  const bool named = parent != nullptr && parent->id == origin.split && names_child(*parent, r.id);
  r.status = named ? SplitStatus::runnable : SplitStatus::pending;
  return r;
}

SplitRecord park_residual_without_spec(const std::string& id, const SplitOrigin& origin,
                                       std::uint64_t epoch, std::string_view problem) {
  SplitRecord r;
  r.id = id;
  r.epoch = epoch;
  r.cut_from = origin;
  return park_for_spec(r, problem);
}

std::size_t apply_cuts(SplitRecord& rebuilt, const std::vector<CutSeen>& cuts) {
  std::size_t unusable = 0;
  const SplitProgress* resume = nullptr;
  for (const CutSeen& c : cuts) {
    rebuilt.children.push_back(c.child);
    if (!c.spec || !c.spec->parent_progress) {
      ++unusable;
      continue;
    }
    unusable = 0;
    resume = &*c.spec->parent_progress;
    const std::uint64_t w = c.spec->spec.weight;
    rebuilt.weight = rebuilt.weight > w ? rebuilt.weight - w : 0;
  }
  if (resume) rebuilt.progress = *resume;
  return unusable;
}

bool child_id_fits(std::string_view parent) noexcept {
  return parent.size() + kChildSuffixBytes <= kMaxSplitIdBytes;
}

SplitRecord pending_child(const std::string& child, std::uint64_t weight, SplitOrigin origin) {
  SplitRecord r;
  r.id = child;
  r.status = SplitStatus::pending;
  r.weight = weight;
  r.cut_from = std::move(origin);
  return r;
}

SplitRecord cut_parent(const SplitRecord& parent, const SplitProgress& progress,
                       const std::string& child, std::uint64_t residual_weight) {
  SplitRecord next = parent;
  const std::optional<std::uint64_t> done = progress.done ? progress.done : parent.progress.done;
  next.progress = progress;
  next.progress.done = done;
  next.children.push_back(child);
  next.weight = parent.weight > residual_weight ? parent.weight - residual_weight : 0;
  return next;
}

bool names_child(const SplitRecord& parent, std::string_view child) noexcept {
  return std::find(parent.children.begin(), parent.children.end(), child) != parent.children.end();
}

ChildFate pending_child_fate(const SplitRecord& child, const SplitRecord* parent) {
  if (child.status != SplitStatus::pending || !child.cut_from || parent == nullptr ||
      parent->id != child.cut_from->split) {
    return ChildFate::wait;
  }
  if (names_child(*parent, child.id)) return ChildFate::flip;
  // A parent older than the cut is a view that has not seen the cutter's claim yet.
  if (parent->epoch < child.cut_from->epoch) return ChildFate::wait;
  // The tenancy that cut it is live only while the parent is runnable at that epoch with an owner.
  const bool cutter_live = parent->status == SplitStatus::runnable &&
                           parent->epoch == child.cut_from->epoch && parent->owner.has_value();
  return cutter_live ? ChildFate::wait : ChildFate::orphan;
}

}  // namespace etlc::core
