// The output format: one JSON object per input row, on its own line:
//   {"file":"part-00001.csv","offset":1234,"row":{"id":"7","name":"Smith, John",...}}
// `file` and `offset` identify the input row (its first byte); `row` maps the header's column
// names to the row's fields (always strings). Malformed rows go to the rejects file instead:
//   {"file":"part-00001.csv","offset":1300,"error":"quote inside an unquoted field"}
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fb {

// Appends `s` as a JSON string literal (quotes included). `s` must be valid UTF-8.
void append_json_string(std::string& out, std::string_view s);

// Appends the line of one valid row (newline included).
void append_row_line(std::string& out, std::string_view file, std::uint64_t offset,
                     const std::vector<std::string>& header,
                     const std::vector<std::string>& fields);

// Appends the line of one malformed row (newline included).
void append_reject_line(std::string& out, std::string_view file, std::uint64_t offset,
                        std::string_view error);

}  // namespace fb
