// Standard base64 (RFC 4648 section 4: alphabet A-Z a-z 0-9 + /, '=' padding) for the opaque byte
// fields of records. Pure; no allocation beyond the result.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace etlc::core {

// Padded standard base64 of `bytes`; the empty input encodes to "".
std::string base64_encode(std::string_view bytes);

// The bytes `text` encodes, or nullopt unless `text` is exactly what base64_encode produces for
// them: length a multiple of 4, only alphabet characters, padding only at the end (at most two),
// unused trailing bits zero, no whitespace. Canonical form keeps record encoding a bijection.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace etlc::core
