// Strict, versioned JSON codecs for the protocol's records (see records.hpp).
//
// Decoding order, so that each input has exactly one reported error: size, nesting and JSON
// syntax (malformed), top-level object (malformed), "v" (wrong_version), unknown fields,
// then each field in declaration order (missing_field, wrong_type), then the key/id check.
#include "core/records.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "core/base64.hpp"
#include "core/cut_rules.hpp"
#include "core/keys.hpp"
#include "core/utf8.hpp"
#include "etlc/config.hpp"
#include "etlc/store.hpp"

namespace etlc::core {

namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

// Our records nest at most two levels (split.progress, assign.splits); anything much deeper is
// garbage, refused before the parser builds it.
constexpr int kMaxJsonDepth = 8;
// Field names and values quoted from hostile input are cut to this many bytes in messages.
constexpr std::size_t kMaxQuotedBytes = 80;

// `s` in single quotes for an error message: control bytes, quotes and backslashes escaped,
// long strings cut at a UTF-8 boundary.
std::string printable(std::string_view s, std::size_t max_bytes = kMaxQuotedBytes) {
  bool cut = false;
  if (s.size() > max_bytes) {
    std::size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) --n;
    s = s.substr(0, n);
    cut = true;
  }
  std::string out = "'";
  for (char c : s) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20U || b == 0x7FU || c == '\'' || c == '\\') {
      out += fmt::format("\\x{:02X}", b);
    } else {
      out.push_back(c);
    }
  }
  out += cut ? "'..." : "'";
  return out;
}

[[noreturn]] void fail(std::string_view key, RecordErrc code, const std::string& detail) {
  throw RecordError(code, std::string(key), detail);
}

// False if brackets nest deeper than kMaxJsonDepth or close more than they open. Strings are
// skipped with JSON's own rules, so for any input the depth seen here is the depth the parser
// would reach before it stops.
bool nesting_ok(std::string_view s) noexcept {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : s) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return false;
    } else if (c == ']' || c == '}') {
      if (--depth < 0) return false;
    }
  }
  return true;
}

// Parses `bytes` as one JSON object with "v" == kRecordVersion. nlohmann keeps the last of
// duplicate keys silently; a strict codec refuses them, so a callback tracks keys per object.
Json parse_record(std::string_view key, std::string_view bytes) {
  // Everything a store can hold is read (the store refuses more: etlc/store.hpp); the encoders
  // keep our own records within kMaxValueBytes.
  if (bytes.size() > kMaxStoredValueBytes) {
    fail(key, RecordErrc::too_large,
         fmt::format("value of {} bytes exceeds kMaxStoredValueBytes ({})", bytes.size(),
                     kMaxStoredValueBytes));
  }
  if (!nesting_ok(bytes)) {
    fail(key, RecordErrc::malformed,
         fmt::format("not a record: brackets unbalanced or nested deeper than {}", kMaxJsonDepth));
  }
  std::vector<std::set<std::string>> seen;
  std::optional<std::string> duplicate;
  auto on_event = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        seen.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!seen.empty()) seen.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!seen.empty() && parsed.is_string() &&
            !seen.back().insert(parsed.get_ref<const std::string&>()).second && !duplicate) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  Json j = Json::parse(bytes.begin(), bytes.end(), on_event, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(key, RecordErrc::malformed, "not valid JSON");
  if (!j.is_object()) fail(key, RecordErrc::malformed, "not a JSON object");
  if (duplicate)
    fail(key, RecordErrc::malformed, fmt::format("duplicate field {}", printable(*duplicate)));
  auto v = j.find("v");
  if (v == j.end()) fail(key, RecordErrc::wrong_version, "missing field 'v'");
  if (!v->is_number_unsigned() || v->get<std::uint64_t>() != kRecordVersion) {
    fail(key, RecordErrc::wrong_version,
         fmt::format("field 'v' is {}, this version reads only {}", printable(v->dump()),
                     kRecordVersion));
  }
  return j;
}

// One JSON object being decoded: typed, strict field access with errors naming key and field.
class Fields {
 public:
  Fields(std::string_view key, const Json& obj, std::string prefix)
      : key_(key), obj_(obj), prefix_(std::move(prefix)) {}

  // unknown_field for any member not in `names` (the top level passes "v" too).
  void allow_only(std::initializer_list<std::string_view> names) const {
    for (const auto& item : obj_.items()) {
      if (std::find(names.begin(), names.end(), item.key()) == names.end()) {
        fail(key_, RecordErrc::unknown_field, "unknown field " + printable(path(item.key())));
      }
    }
  }

  std::uint64_t u64(std::string_view name) const {
    const Json& v = required(name);
    if (!v.is_number_unsigned()) wrong_type(name, "an unsigned 64-bit integer");
    return v.get<std::uint64_t>();
  }

  std::uint32_t u32(std::string_view name) const {
    const Json& v = required(name);
    if (!v.is_number_unsigned() ||
        v.get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
      wrong_type(name, "an unsigned 32-bit integer");
    }
    return static_cast<std::uint32_t>(v.get<std::uint64_t>());
  }

  bool boolean(std::string_view name) const {
    const Json& v = required(name);
    if (!v.is_boolean()) wrong_type(name, "true or false");
    return v.get<bool>();
  }

  std::string text(std::string_view name) const { return as_text(name, required(name)); }

  // Absent means nullopt; an explicit null is a wrong type (one encoding per value).
  std::optional<std::uint64_t> optional_u64(std::string_view name) const {
    if (find(name) == nullptr) return std::nullopt;
    return u64(name);
  }

  std::optional<std::string> optional_text(std::string_view name) const {
    const Json* v = find(name);
    if (v == nullptr) return std::nullopt;
    return as_text(name, *v);
  }

  std::string id(std::string_view name) const { return as_id(name, required(name)); }

  std::optional<std::string> optional_id(std::string_view name) const {
    const Json* v = find(name);
    if (v == nullptr) return std::nullopt;
    return as_id(name, *v);
  }

  std::string bytes(std::string_view name, std::size_t max_bytes,
                    std::string_view limit_name) const {
    std::string text64 = text(name);
    auto raw = base64_decode(text64);
    if (!raw) wrong_type(name, "canonical standard base64");
    if (raw->size() > max_bytes) {
      fail(key_, RecordErrc::wrong_type,
           fmt::format("field {} holds {} bytes, more than {} ({})", printable(path(name)),
                       raw->size(), limit_name, max_bytes));
    }
    return std::move(*raw);
  }

  Fields object(std::string_view name) const {
    const Json& v = required(name);
    if (!v.is_object()) wrong_type(name, "an object");
    return Fields(key_, v, path(name) + ".");
  }

  // The string field `name`, which must be one of `names` (indexed by the enum's value).
  template <typename Enum, std::size_t N>
  Enum enumerated(std::string_view name, const std::string_view (&names)[N]) const {
    const Json& v = required(name);
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      for (std::size_t i = 0; i < N; ++i) {
        if (s == names[i]) return static_cast<Enum>(i);
      }
    }
    std::string allowed;
    for (std::size_t i = 0; i < N; ++i) allowed += (i == 0 ? "" : ", ") + std::string(names[i]);
    wrong_type(name, "one of " + allowed);
  }

  std::vector<std::string> sorted_unique_ids(std::string_view name) const {
    const Json& v = required(name);
    if (!v.is_array()) wrong_type(name, "an array of ids");
    std::vector<std::string> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      std::string elem = fmt::format("{}[{}]", name, i);
      std::string id = as_id(elem, v[i]);
      if (!out.empty() && !(out.back() < id)) {
        fail(key_, RecordErrc::wrong_type,
             fmt::format("field {} must be sorted and unique, but {} follows {}",
                         printable(path(name)), printable(id), printable(out.back())));
      }
      out.push_back(std::move(id));
    }
    return out;
  }

  bool has(std::string_view name) const { return find(name) != nullptr; }

  // An array of at most kMaxChildrenPerSplit ids, order kept; absent means empty.
  std::vector<std::string> optional_ids(std::string_view name) const {
    std::vector<std::string> out;
    const Json* v = find(name);
    if (v == nullptr) return out;
    if (!v->is_array() || v->size() > kMaxChildrenPerSplit) {
      wrong_type(name, fmt::format("an array of at most {} ids", kMaxChildrenPerSplit));
    }
    for (std::size_t i = 0; i < v->size(); ++i) {
      out.push_back(as_id(fmt::format("{}[{}]", name, i), (*v)[i]));
    }
    return out;
  }

  // The size of the array `name`, at most max_elements.
  std::size_t array_size(std::string_view name, std::size_t max_elements) const {
    const Json& v = required(name);
    if (!v.is_array() || v.size() > max_elements) {
      wrong_type(name, fmt::format("an array of at most {} elements", max_elements));
    }
    return v.size();
  }

  // Element i of the array `name` (array_size checked it), which must be an object.
  Fields element(std::string_view name, std::size_t i) const {
    const Json& v = required(name)[i];
    std::string elem = fmt::format("{}[{}]", name, i);
    if (!v.is_object()) wrong_type(elem, "an object");
    return Fields(key_, v, path(elem) + ".");
  }

  [[noreturn]] void fail_field(std::string_view name, std::string_view problem) const {
    fail(key_, RecordErrc::wrong_type, fmt::format("field {} {}", printable(path(name)), problem));
  }

  std::string path(std::string_view name) const { return prefix_ + std::string(name); }

 private:
  const Json* find(std::string_view name) const {
    auto it = obj_.find(std::string(name));
    return it == obj_.end() ? nullptr : &*it;
  }

  const Json& required(std::string_view name) const {
    const Json* v = find(name);
    if (v == nullptr)
      fail(key_, RecordErrc::missing_field, "missing field " + printable(path(name)));
    return *v;
  }

  [[noreturn]] void wrong_type(std::string_view name, std::string_view expected) const {
    fail(key_, RecordErrc::wrong_type,
         fmt::format("field {} must be {}", printable(path(name)), expected));
  }

  std::string as_text(std::string_view name, const Json& v) const {
    // The parser has already checked the UTF-8 of every string.
    if (!v.is_string()) wrong_type(name, "a string");
    return v.get<std::string>();
  }

  std::string as_id(std::string_view name, const Json& v) const {
    std::string s = as_text(name, v);
    try {
      validate_id(s, "id");
    } catch (const ConfigError& e) {
      fail(key_, RecordErrc::wrong_type,
           fmt::format("field {} is not a valid id ({})", printable(path(name)), e.what()));
    }
    return s;
  }

  std::string_view key_;
  const Json& obj_;
  std::string prefix_;
};

// Decodes with `body`, turning any stray nlohmann exception into malformed: a decoder throws
// nothing but RecordError on hostile bytes.
template <typename Body>
auto decode_with(std::string_view key, std::string_view bytes, Body body) {
  try {
    Json j = parse_record(key, bytes);
    return body(Fields(key, j, ""));
  } catch (const Json::exception& e) {
    fail(key, RecordErrc::malformed, fmt::format("unreadable JSON ({})", e.what()));
  }
}

// id_mismatch unless `key` is `prefix` + the encoding of `id`.
void check_key_id(std::string_view key, std::string_view prefix, std::string_view field,
                  const std::string& id) {
  auto from_key = id_from_key(key, prefix);
  if (!from_key) {
    fail(key, RecordErrc::id_mismatch,
         fmt::format("the key is not '{}' followed by an encoded id, so field '{}' cannot match it",
                     prefix, field));
  }
  if (*from_key != id) {
    fail(key, RecordErrc::id_mismatch,
         fmt::format("field '{}' is {} but the key holds {}", field, printable(id),
                     printable(*from_key)));
  }
}

constexpr std::string_view kStatusNames[] = {"runnable", "completed", "quarantined", "pending"};
constexpr std::string_view kFinalityNames[] = {"open", "final"};
constexpr std::string_view kVerdictNames[] = {"running", "complete", "stalled", "failed"};

// --- encoding ---------------------------------------------------------------------------------

// Encoders refuse what their decoder would refuse, so encode(r) succeeding means
// decode(key, encode(r)) == r.
void check_id(std::string_view record, std::string_view field, std::string_view id) {
  validate_id(id, fmt::format("{} record field '{}'", record, field));
}

// The problem with a split record's children list, if any (the encoder throws it, the decoder
// reports it as wrong_type).
std::optional<std::string> children_problem(const std::vector<std::string>& children) {
  if (children.size() > kMaxChildrenPerSplit) {
    return fmt::format("holds {} ids, more than kMaxChildrenPerSplit ({})", children.size(),
                       kMaxChildrenPerSplit);
  }
  std::vector<std::string> sorted = children;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return std::string("repeats an id");
  }
  return std::nullopt;
}

// The problem with a split record's origin, if any: a pending record must have one, and the
// origin must be the one its residual's id names (garbage that would wait for ever otherwise).
std::optional<std::string> origin_problem(const SplitRecord& r) {
  if (!r.cut_from) {
    if (r.status == SplitStatus::pending) return std::string("is required on a pending record");
    return std::nullopt;
  }
  if (residual_origin(r.id) != r.cut_from) {
    return fmt::format("names split '{}' epoch {}, not the origin the id '{}' names",
                       r.cut_from->split, r.cut_from->epoch, r.id);
  }
  return std::nullopt;
}

void check_children(const std::vector<std::string>& children) {
  for (std::size_t i = 0; i < children.size(); ++i) {
    check_id("split", fmt::format("children[{}]", i), children[i]);
  }
  if (auto problem = children_problem(children)) {
    throw ConfigError("split record field 'children' " + *problem);
  }
}

// The problem with an assignment record's split requests, if any.
std::optional<std::string> asks_problem(const AssignmentRecord& r) {
  for (std::size_t i = 0; i < r.split_requests.size(); ++i) {
    const SplitAsk& a = r.split_requests[i];
    if (i > 0 && !(r.split_requests[i - 1].split < a.split)) {
      return fmt::format("must be sorted by split and unique (index {} is out of order)", i);
    }
    if (!std::binary_search(r.splits.begin(), r.splits.end(), a.split)) {
      return fmt::format("names '{}', which is not one of the record's splits", a.split);
    }
    if (a.keep_ppm == 0 || a.keep_ppm >= 1'000'000) {
      return fmt::format("index {}: keep_ppm {} is outside 1..999999", i, a.keep_ppm);
    }
  }
  return std::nullopt;
}

void check_asks(const AssignmentRecord& r) {
  for (std::size_t i = 0; i < r.split_requests.size(); ++i) {
    check_id("assignment", fmt::format("split_requests[{}].split", i), r.split_requests[i].split);
  }
  if (auto problem = asks_problem(r)) {
    throw ConfigError("assignment record field 'split_requests' " + *problem);
  }
}

void check_text(std::string_view record, std::string_view field, std::string_view text) {
  if (auto problem = find_utf8_problem(text)) {
    throw ConfigError(fmt::format("{} record field '{}' is not valid UTF-8: {} at byte {}", record,
                                  field, problem->rule, problem->offset));
  }
}

void check_size(std::string_view record, std::string_view field, std::size_t size,
                std::size_t max_bytes, std::string_view limit_name) {
  if (size > max_bytes) {
    throw ConfigError(fmt::format("{} record field '{}' holds {} bytes, more than {} ({})", record,
                                  field, size, limit_name, max_bytes));
  }
}

std::string finish(std::string_view key, const OrderedJson& j) {
  std::string out = j.dump();
  if (out.size() > kMaxValueBytes) {
    fail(key, RecordErrc::too_large,
         fmt::format("encoded record is {} bytes, more than kMaxValueBytes ({})", out.size(),
                     kMaxValueBytes));
  }
  return out;
}

OrderedJson versioned() {
  OrderedJson j = OrderedJson::object();
  j["v"] = kRecordVersion;
  return j;
}

// {"watermark":u64,"state":b64,"done"?:u64}: a split record's progress, a residual's spec's
// parent_progress.
OrderedJson progress_json(const SplitProgress& p) {
  OrderedJson j = OrderedJson::object();
  j["watermark"] = p.watermark;
  j["state"] = base64_encode(p.state);
  if (p.done) j["done"] = *p.done;
  return j;
}

SplitProgress progress_from(const Fields& f) {
  f.allow_only({"watermark", "state", "done"});
  SplitProgress p;
  p.watermark = f.u64("watermark");
  p.state = f.bytes("state", kMaxProgressStateBytes, "kMaxProgressStateBytes");
  p.done = f.optional_u64("done");
  return p;
}

}  // namespace

RecordError::RecordError(RecordErrc code, std::string key, const std::string& detail)
    : Error(fmt::format("record at key {}: {}", printable(key, kMaxKeyBytes), detail)),
      code_(code),
      key_(std::move(key)) {}

std::string_view to_string(RecordErrc c) noexcept {
  switch (c) {
    case RecordErrc::malformed:
      return "malformed";
    case RecordErrc::wrong_version:
      return "wrong_version";
    case RecordErrc::missing_field:
      return "missing_field";
    case RecordErrc::unknown_field:
      return "unknown_field";
    case RecordErrc::wrong_type:
      return "wrong_type";
    case RecordErrc::id_mismatch:
      return "id_mismatch";
    case RecordErrc::too_large:
      return "too_large";
  }
  return "unknown";
}

std::string_view to_string(SplitStatus s) noexcept {
  auto i = static_cast<std::size_t>(s);
  return i < std::size(kStatusNames) ? kStatusNames[i] : "unknown";
}

std::string_view to_string(Finality f) noexcept {
  auto i = static_cast<std::size_t>(f);
  return i < std::size(kFinalityNames) ? kFinalityNames[i] : "unknown";
}

std::string_view to_string(Verdict v) noexcept {
  auto i = static_cast<std::size_t>(v);
  return i < std::size(kVerdictNames) ? kVerdictNames[i] : "unknown";
}

std::string encode(const LeaderRecord& r) {
  check_id("leader", "owner", r.owner);
  check_text("leader", "nonce", r.nonce);
  OrderedJson j = versioned();
  j["owner"] = r.owner;
  j["nonce"] = r.nonce;
  j["term"] = r.term;
  return finish(kLeaderKey, j);
}

std::string encode(const StandbyRecord& r) {
  check_id("standby", "owner", r.owner);
  check_text("standby", "nonce", r.nonce);
  OrderedJson j = versioned();
  j["owner"] = r.owner;
  j["nonce"] = r.nonce;
  return finish(kStandbyKey, j);
}

std::string encode(const ProgressRecord& r) {
  OrderedJson j = versioned();
  j["term"] = r.term;
  j["planned"] = r.planned;
  j["done"] = r.done;
  j["remaining"] = r.remaining;
  if (r.rate_per_s) j["rate_per_s"] = *r.rate_per_s;
  return finish(kProgressKey, j);
}

std::string encode(const PlanRecord& r) {
  check_text("plan", "fingerprint", r.fingerprint);
  if (r.cursor) check_text("plan", "cursor", *r.cursor);
  if (r.message) check_text("plan", "message", *r.message);
  OrderedJson j = versioned();
  j["fingerprint"] = r.fingerprint;
  j["term"] = r.term;
  j["finality"] = to_string(r.finality);
  j["planned"] = r.planned;
  j["split_count"] = r.split_count;
  if (r.cursor) j["cursor"] = *r.cursor;
  j["completed"] = r.completed;
  j["quarantined"] = r.quarantined;
  j["verdict"] = to_string(r.verdict);
  if (r.message) j["message"] = *r.message;
  return finish(kPlanKey, j);
}

std::string encode(const SpecRecord& r) {
  check_id("spec", "id", r.spec.id);
  check_size("spec", "descriptor", r.spec.descriptor.size(), kMaxDescriptorBytes,
             "kMaxDescriptorBytes");
  if (r.parent_progress) {
    check_size("spec", "parent_progress.state", r.parent_progress->state.size(),
               kMaxProgressStateBytes, "kMaxProgressStateBytes");
    if (!residual_id_form(r.spec.id)) {
      throw ConfigError(fmt::format(
          "spec record field 'parent_progress' is for residuals only, and '{}' is not one",
          r.spec.id));
    }
  }
  OrderedJson j = versioned();
  j["id"] = r.spec.id;
  j["descriptor"] = base64_encode(r.spec.descriptor);
  j["weight"] = r.spec.weight;
  if (r.parent_progress) j["parent_progress"] = progress_json(*r.parent_progress);
  return finish(spec_key(r.spec.id), j);
}

std::string encode(const SplitRecord& r) {
  check_id("split", "id", r.id);
  if (r.owner) check_id("split", "owner", *r.owner);
  if (r.owner_nonce) check_text("split", "owner_nonce", *r.owner_nonce);
  check_size("split", "progress.state", r.progress.state.size(), kMaxProgressStateBytes,
             "kMaxProgressStateBytes");
  if (r.last_error) check_text("split", "last_error", *r.last_error);
  check_children(r.children);
  if (r.cut_from) check_id("split", "cut_from.split", r.cut_from->split);
  if (auto problem = origin_problem(r)) {
    throw ConfigError("split record field 'cut_from' " + *problem);
  }
  OrderedJson j = versioned();
  j["id"] = r.id;
  j["epoch"] = r.epoch;
  j["status"] = to_string(r.status);
  if (r.owner) j["owner"] = *r.owner;
  if (r.owner_nonce) j["owner_nonce"] = *r.owner_nonce;
  j["attempts"] = r.attempts;
  j["weight"] = r.weight;
  j["progress"] = progress_json(r.progress);
  if (r.last_error) j["last_error"] = *r.last_error;
  if (!r.children.empty()) j["children"] = r.children;
  if (r.cut_from) {
    OrderedJson origin = OrderedJson::object();
    origin["split"] = r.cut_from->split;
    origin["epoch"] = r.cut_from->epoch;
    j["cut_from"] = std::move(origin);
  }
  return finish(split_key(r.id), j);
}

std::string encode(const LeaseRecord& r) {
  check_id("lease", "split", r.split);
  check_id("lease", "owner", r.owner);
  check_text("lease", "nonce", r.nonce);
  OrderedJson j = versioned();
  j["split"] = r.split;
  j["owner"] = r.owner;
  j["nonce"] = r.nonce;
  j["epoch"] = r.epoch;
  return finish(lease_key(r.split), j);
}

std::string encode(const MemberRecord& r) {
  check_id("member", "instance", r.instance);
  check_text("member", "nonce", r.nonce);
  check_text("member", "fingerprint", r.fingerprint);
  OrderedJson j = versioned();
  j["instance"] = r.instance;
  j["nonce"] = r.nonce;
  j["fingerprint"] = r.fingerprint;
  j["max_in_flight"] = r.max_in_flight;
  j["counter"] = r.counter;
  j["lease_ms"] = r.lease_ms;
  return finish(member_key(r.instance), j);
}

std::string encode(const AssignmentRecord& r) {
  check_id("assignment", "instance", r.instance);
  for (std::size_t i = 0; i < r.splits.size(); ++i) {
    check_id("assignment", fmt::format("splits[{}]", i), r.splits[i]);
    if (i > 0 && !(r.splits[i - 1] < r.splits[i])) {
      throw ConfigError(fmt::format(
          "assignment record field 'splits' must be sorted and unique (index {} is out of order)",
          i));
    }
  }
  check_asks(r);
  OrderedJson j = versioned();
  j["instance"] = r.instance;
  j["term"] = r.term;
  j["splits"] = r.splits;
  if (!r.split_requests.empty()) {
    OrderedJson asks = OrderedJson::array();
    for (const SplitAsk& a : r.split_requests) {
      OrderedJson o = OrderedJson::object();
      o["split"] = a.split;
      o["epoch"] = a.epoch;
      o["children"] = a.children;
      o["keep_ppm"] = a.keep_ppm;
      asks.push_back(std::move(o));
    }
    j["split_requests"] = std::move(asks);
  }
  return finish(assign_key(r.instance), j);
}

std::string encode(const CordonRecord& r) {
  check_id("cordon", "instance", r.instance);
  check_text("cordon", "reason", r.reason);
  OrderedJson j = versioned();
  j["instance"] = r.instance;
  j["reason"] = r.reason;
  return finish(cordon_key(r.instance), j);
}

std::string encode(const PauseRecord& r) {
  check_text("pause", "reason", r.reason);
  check_text("pause", "by", r.by);
  OrderedJson j = versioned();
  j["reason"] = r.reason;
  j["by"] = r.by;
  j["since_ms"] = r.since_ms;
  return finish(kPauseKey, j);
}

LeaderRecord decode_leader(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [](const Fields& f) {
    f.allow_only({"v", "owner", "nonce", "term"});
    LeaderRecord r;
    r.owner = f.id("owner");
    r.nonce = f.text("nonce");
    r.term = f.u64("term");
    return r;
  });
}

StandbyRecord decode_standby(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [](const Fields& f) {
    f.allow_only({"v", "owner", "nonce"});
    StandbyRecord r;
    r.owner = f.id("owner");
    r.nonce = f.text("nonce");
    return r;
  });
}

ProgressRecord decode_progress(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [](const Fields& f) {
    f.allow_only({"v", "term", "planned", "done", "remaining", "rate_per_s"});
    ProgressRecord r;
    r.term = f.u64("term");
    r.planned = f.u64("planned");
    r.done = f.u64("done");
    r.remaining = f.u64("remaining");
    r.rate_per_s = f.optional_u64("rate_per_s");
    return r;
  });
}

PlanRecord decode_plan(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [](const Fields& f) {
    f.allow_only({"v", "fingerprint", "term", "finality", "planned", "split_count", "cursor",
                  "completed", "quarantined", "verdict", "message"});
    PlanRecord r;
    r.fingerprint = f.text("fingerprint");
    r.term = f.u64("term");
    r.finality = f.enumerated<Finality>("finality", kFinalityNames);
    r.planned = f.boolean("planned");
    r.split_count = f.u64("split_count");
    r.cursor = f.optional_text("cursor");
    r.completed = f.u64("completed");
    r.quarantined = f.u64("quarantined");
    r.verdict = f.enumerated<Verdict>("verdict", kVerdictNames);
    r.message = f.optional_text("message");
    return r;
  });
}

SpecRecord decode_spec(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "id", "descriptor", "weight", "parent_progress"});
    SpecRecord r;
    r.spec.id = f.id("id");
    r.spec.descriptor = f.bytes("descriptor", kMaxDescriptorBytes, "kMaxDescriptorBytes");
    r.spec.weight = f.u64("weight");
    if (f.has("parent_progress")) {
      r.parent_progress = progress_from(f.object("parent_progress"));
      if (!residual_id_form(r.spec.id)) {
        f.fail_field("parent_progress", "is for residuals only");
      }
    }
    check_key_id(key, kSpecPrefix, "id", r.spec.id);
    return r;
  });
}

SplitRecord decode_split(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "id", "epoch", "status", "owner", "owner_nonce", "attempts", "weight",
                  "progress", "last_error", "children", "cut_from"});
    SplitRecord r;
    r.id = f.id("id");
    r.epoch = f.u64("epoch");
    r.status = f.enumerated<SplitStatus>("status", kStatusNames);
    r.owner = f.optional_id("owner");
    r.owner_nonce = f.optional_text("owner_nonce");
    r.attempts = f.u32("attempts");
    r.weight = f.u64("weight");
    r.progress = progress_from(f.object("progress"));
    r.last_error = f.optional_text("last_error");
    r.children = f.optional_ids("children");
    if (r.children.empty() && f.has("children")) {
      f.fail_field("children", "must be absent when there are none");
    }
    if (auto problem = children_problem(r.children)) f.fail_field("children", *problem);
    if (f.has("cut_from")) {
      Fields origin = f.object("cut_from");
      origin.allow_only({"split", "epoch"});
      r.cut_from = SplitOrigin{origin.id("split"), origin.u64("epoch")};
    }
    if (auto problem = origin_problem(r)) f.fail_field("cut_from", *problem);
    check_key_id(key, kSplitPrefix, "id", r.id);
    return r;
  });
}

LeaseRecord decode_lease(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "split", "owner", "nonce", "epoch"});
    LeaseRecord r;
    r.split = f.id("split");
    r.owner = f.id("owner");
    r.nonce = f.text("nonce");
    r.epoch = f.u64("epoch");
    check_key_id(key, kLeasePrefix, "split", r.split);
    return r;
  });
}

MemberRecord decode_member(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "instance", "nonce", "fingerprint", "max_in_flight", "counter", "lease_ms"});
    MemberRecord r;
    r.instance = f.id("instance");
    r.nonce = f.text("nonce");
    r.fingerprint = f.text("fingerprint");
    r.max_in_flight = f.u32("max_in_flight");
    r.counter = f.u64("counter");
    r.lease_ms = f.u64("lease_ms");
    check_key_id(key, kMemberPrefix, "instance", r.instance);
    return r;
  });
}

std::vector<SplitAsk> decode_asks(const Fields& f) {
  std::vector<SplitAsk> out;
  if (!f.has("split_requests")) return out;
  const std::size_t n = f.array_size("split_requests", kMaxLanes);
  if (n == 0) f.fail_field("split_requests", "must be absent when there are none");
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    Fields a = f.element("split_requests", i);
    a.allow_only({"split", "epoch", "children", "keep_ppm"});
    out.push_back(SplitAsk{a.id("split"), a.u64("epoch"), a.u32("children"), a.u32("keep_ppm")});
  }
  return out;
}

AssignmentRecord decode_assignment(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "instance", "term", "splits", "split_requests"});
    AssignmentRecord r;
    r.instance = f.id("instance");
    r.term = f.u64("term");
    r.splits = f.sorted_unique_ids("splits");
    r.split_requests = decode_asks(f);
    if (auto problem = asks_problem(r)) f.fail_field("split_requests", *problem);
    check_key_id(key, kAssignPrefix, "instance", r.instance);
    return r;
  });
}

CordonRecord decode_cordon(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [key](const Fields& f) {
    f.allow_only({"v", "instance", "reason"});
    CordonRecord r;
    r.instance = f.id("instance");
    r.reason = f.text("reason");
    check_key_id(key, kCordonPrefix, "instance", r.instance);
    return r;
  });
}

PauseRecord decode_pause(std::string_view key, std::string_view bytes) {
  return decode_with(key, bytes, [](const Fields& f) {
    f.allow_only({"v", "reason", "by", "since_ms"});
    PauseRecord r;
    r.reason = f.text("reason");
    r.by = f.text("by");
    r.since_ms = f.u64("since_ms");
    return r;
  });
}

}  // namespace etlc::core
