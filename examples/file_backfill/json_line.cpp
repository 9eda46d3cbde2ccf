#include "json_line.hpp"

#include <charconv>

namespace fb {

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  std::size_t run = 0;  // start of the pending run of characters that need no escape
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out.push_back(kHex[c >> 4]);
        out.push_back(kHex[c & 0xF]);
    }
  }
  out.append(s.data() + run, s.size() - run);
  out.push_back('"');
}

namespace {
void append_head(std::string& out, std::string_view file, std::uint64_t offset) {
  out += "{\"file\":";
  append_json_string(out, file);
  out += ",\"offset\":";
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, offset);
  out.append(buf, r.ptr);
}
}  // namespace

void append_row_line(std::string& out, std::string_view file, std::uint64_t offset,
                     const std::vector<std::string>& header,
                     const std::vector<std::string>& fields) {
  append_head(out, file, offset);
  out += ",\"row\":{";
  for (std::size_t i = 0; i < fields.size() && i < header.size(); ++i) {
    if (i != 0) out.push_back(',');
    append_json_string(out, header[i]);
    out.push_back(':');
    append_json_string(out, fields[i]);
  }
  out += "}}\n";
}

void append_reject_line(std::string& out, std::string_view file, std::uint64_t offset,
                        std::string_view error) {
  append_head(out, file, offset);
  out += ",\"error\":";
  append_json_string(out, error);
  out += "}\n";
}

}  // namespace fb
