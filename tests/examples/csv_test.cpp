// The CSV rules of the file backfill, case by case.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "csv.hpp"

namespace fb {
namespace {

using Fields = std::vector<std::string>;

struct Parsed {
  CsvParse::Kind kind;
  Fields fields;
  std::size_t start, next;
  std::string error;
};

Parsed parse(std::string_view data, std::size_t pos = 0) {
  Fields f;
  CsvParse p = parse_csv_record(data, pos, f);
  return {p.kind, f, p.start, p.next, p.error};
}

std::vector<CsvRow> rows(std::string_view data, std::size_t from = 0) {
  CsvFile f(data, from);
  std::vector<CsvRow> out;
  CsvRow r;
  while (f.next(r)) out.push_back(r);
  return out;
}

TEST(CsvTest, plain_fields_split_on_commas_and_end_at_a_newline) {
  auto p = parse("a,b,c\nnext");
  EXPECT_EQ(p.kind, CsvParse::Kind::record);
  EXPECT_EQ(p.fields, (Fields{"a", "b", "c"}));
  EXPECT_EQ(p.next, 6u);
}

TEST(CsvTest, crlf_line_ends_are_not_part_of_the_last_field) {
  auto p = parse("a,b\r\nc");
  EXPECT_EQ(p.fields, (Fields{"a", "b"}));
  EXPECT_EQ(p.next, 5u);
  auto q = parse("\"x\"\r\n");
  EXPECT_EQ(q.fields, (Fields{"x"}));
  EXPECT_EQ(q.next, 5u);
}

TEST(CsvTest, quoted_fields_keep_commas_newlines_and_doubled_quotes) {
  auto p = parse("1,\"Smith, John\",\"two\nlines\",\"say \"\"hi\"\"\"\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::record);
  EXPECT_EQ(p.fields, (Fields{"1", "Smith, John", "two\nlines", "say \"hi\""}));
}

TEST(CsvTest, empty_fields_and_a_trailing_comma) {
  EXPECT_EQ(parse(",,\n").fields, (Fields{"", "", ""}));
  EXPECT_EQ(parse("a,\n").fields, (Fields{"a", ""}));
  EXPECT_EQ(parse("a,").fields, (Fields{"a", ""}));
  EXPECT_EQ(parse("\"\",x").fields, (Fields{"", "x"}));
}

TEST(CsvTest, the_last_record_needs_no_newline) {
  auto p = parse("a,b");
  EXPECT_EQ(p.kind, CsvParse::Kind::record);
  EXPECT_EQ(p.fields, (Fields{"a", "b"}));
  EXPECT_EQ(p.next, 3u);
}

TEST(CsvTest, blank_lines_are_skipped) {
  auto p = parse("\n\r\n\na\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::record);
  EXPECT_EQ(p.start, 4u);
  EXPECT_EQ(p.fields, (Fields{"a"}));
  EXPECT_EQ(parse("\n\n").kind, CsvParse::Kind::end);
  EXPECT_EQ(parse("").kind, CsvParse::Kind::end);
}

TEST(CsvTest, a_quote_inside_an_unquoted_field_is_malformed_until_the_line_end) {
  auto p = parse("1,Jo\"hn,x\n2,ok\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::malformed);
  EXPECT_EQ(p.error, "quote inside an unquoted field");
  EXPECT_EQ(p.next, 10u);
  auto q = parse("1,Jo\"hn,x\n2,ok\n", p.next);
  EXPECT_EQ(q.fields, (Fields{"2", "ok"}));
}

TEST(CsvTest, text_after_a_closing_quote_is_malformed) {
  auto p = parse("\"ab\"c,d\nz\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::malformed);
  EXPECT_EQ(p.error, "text after a closing quote");
  EXPECT_EQ(p.next, 8u);
}

TEST(CsvTest, an_unterminated_quote_is_malformed_and_resumes_after_its_line) {
  auto p = parse("1,\"open\n2,b\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::malformed);
  EXPECT_EQ(p.error, "unterminated quoted field");
  EXPECT_EQ(p.next, 8u);
}

TEST(CsvTest, invalid_utf8_is_malformed) {
  EXPECT_EQ(parse("ok,\xff\n").kind, CsvParse::Kind::malformed);
  EXPECT_EQ(parse("ok,\xc3\xa9\n").kind, CsvParse::Kind::record);  // é
  EXPECT_FALSE(valid_utf8("\xc0\xaf"));                            // overlong '/'
  EXPECT_FALSE(valid_utf8("\xed\xa0\x80"));                        // a surrogate
  EXPECT_FALSE(valid_utf8("\xe2\x82"));                            // truncated
  EXPECT_TRUE(valid_utf8("\xf0\x9f\x98\x80"));                     // U+1F600
}

TEST(CsvTest, a_record_past_the_size_limit_is_malformed) {
  std::string big(kMaxRecordBytes + 10, 'x');
  auto p = parse(big + "\nnext\n");
  EXPECT_EQ(p.kind, CsvParse::Kind::malformed);
  EXPECT_EQ(p.next, big.size() + 1);
}

TEST(CsvFileTest, rows_follow_the_header_and_are_identified_by_offset) {
  const std::string data = "id,name\n1,a\n2,\"b\nb\"\n3,c\n";
  auto r = rows(data);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].offset, 8u);
  EXPECT_EQ(r[0].fields, (Fields{"1", "a"}));
  EXPECT_EQ(r[1].offset, 12u);
  EXPECT_EQ(r[1].fields, (Fields{"2", "b\nb"}));
  EXPECT_EQ(r[2].offset, 20u);
  EXPECT_EQ(r[2].next, data.size());
}

TEST(CsvFileTest, a_row_with_the_wrong_field_count_is_malformed_and_reading_goes_on) {
  auto r = rows("a,b\n1,2\n3\n4,5,6\n7,8\n");
  ASSERT_EQ(r.size(), 4u);
  EXPECT_FALSE(r[0].malformed);
  EXPECT_TRUE(r[1].malformed);
  EXPECT_EQ(r[1].error, "1 fields, the header has 2");
  EXPECT_TRUE(r[2].malformed);
  EXPECT_FALSE(r[3].malformed);
  EXPECT_EQ(r[3].fields, (Fields{"7", "8"}));
}

TEST(CsvFileTest, resuming_at_a_record_boundary_reads_the_header_and_the_rest) {
  const std::string data = "h1,h2\nx,1\ny,2\nz,3\n";
  CsvFile f(data, 10);  // "y,2" starts at 10
  EXPECT_EQ(f.header(), (Fields{"h1", "h2"}));
  CsvRow r;
  ASSERT_TRUE(f.next(r));
  EXPECT_EQ(r.fields, (Fields{"y", "2"}));
  ASSERT_TRUE(f.next(r));
  EXPECT_EQ(r.fields, (Fields{"z", "3"}));
  EXPECT_FALSE(f.next(r));
}

TEST(CsvFileTest, a_bad_header_makes_every_row_malformed) {
  auto r = rows("a,a\n1,2\n");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_TRUE(r[0].malformed);
  EXPECT_NE(r[0].error.find("twice"), std::string::npos);
  auto q = rows("a,\"b\n1,2\n");
  for (const auto& row : q) EXPECT_TRUE(row.malformed);
}

TEST(CsvFileTest, empty_and_header_only_files_have_no_rows) {
  EXPECT_TRUE(rows("").empty());
  EXPECT_TRUE(rows("a,b\n").empty());
  EXPECT_TRUE(rows("a,b").empty());
}

}  // namespace
}  // namespace fb
