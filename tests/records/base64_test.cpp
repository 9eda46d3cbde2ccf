// Unit tests of the strict base64 codec used for opaque record fields.
#include <gtest/gtest.h>

#include <string>

#include "core/base64.hpp"

namespace etlc::core {
namespace {

TEST(Base64, EncodesTheRfc4648Vectors) {
  EXPECT_EQ(base64_encode(""), "");
  EXPECT_EQ(base64_encode("f"), "Zg==");
  EXPECT_EQ(base64_encode("fo"), "Zm8=");
  EXPECT_EQ(base64_encode("foo"), "Zm9v");
  EXPECT_EQ(base64_encode("foob"), "Zm9vYg==");
  EXPECT_EQ(base64_encode("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64_encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64_encode(std::string("\xFF\xFE\x00", 3)), "//4A");
}

TEST(Base64, RoundTripsEveryByteValue) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  for (std::size_t len = 0; len <= all.size(); len += 37) {
    const std::string in = all.substr(all.size() - len);
    EXPECT_EQ(base64_decode(base64_encode(in)), in) << "length " << len;
  }
}

TEST(Base64, DecodesCanonicalText) {
  EXPECT_EQ(base64_decode(""), "");
  EXPECT_EQ(base64_decode("Zg=="), "f");
  EXPECT_EQ(base64_decode("Zm8="), "fo");
  EXPECT_EQ(base64_decode("Zm9vYmFy"), "foobar");
}

TEST(Base64, RejectsNonCanonicalText) {
  EXPECT_EQ(base64_decode("Zg"), std::nullopt);    // missing padding
  EXPECT_EQ(base64_decode("Zg="), std::nullopt);   // length not a multiple of 4
  EXPECT_EQ(base64_decode("Zh=="), std::nullopt);  // non-zero unused bits
  EXPECT_EQ(base64_decode("Zm9="), std::nullopt);  // non-zero unused bits
  EXPECT_EQ(base64_decode("Z==="), std::nullopt);  // three pads
  EXPECT_EQ(base64_decode("===="), std::nullopt);
  EXPECT_EQ(base64_decode("Zg==Zg=="), std::nullopt);  // padding in the middle
  EXPECT_EQ(base64_decode("Zm=v"), std::nullopt);      // '=' inside a quad
  EXPECT_EQ(base64_decode("Zm9v\n"), std::nullopt);    // whitespace
  EXPECT_EQ(base64_decode("Zm-_"), std::nullopt);      // the URL-safe alphabet
}

}  // namespace
}  // namespace etlc::core
