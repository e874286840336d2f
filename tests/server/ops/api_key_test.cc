#include "server/ops/api_key.h"

#include <gtest/gtest.h>

#include <string>

namespace beacon {
namespace {

TEST(ConstantTimeEqualsTest, EqualOnlyWhenBytesAndLengthsMatch) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cres", "s3cret"));   // last byte
  EXPECT_FALSE(ConstantTimeEquals("t3cret", "s3cret"));   // first byte
  EXPECT_FALSE(ConstantTimeEquals("s3cre", "s3cret"));    // a prefix
  EXPECT_FALSE(ConstantTimeEquals("s3cretX", "s3cret"));  // longer
  EXPECT_FALSE(ConstantTimeEquals("", "s3cret"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", ""));
  // Embedded NULs are bytes like any other.
  EXPECT_TRUE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0b", 3)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0", 2), "a"));
}

TEST(BearerMatchesTest, NeedsTheSchemeAndTheExactKey) {
  EXPECT_TRUE(BearerMatches("Bearer k-123", "k-123"));
  EXPECT_FALSE(BearerMatches("Bearer k-124", "k-123"));
  EXPECT_FALSE(BearerMatches("Bearer k-123 ", "k-123"));
  EXPECT_FALSE(BearerMatches("bearer k-123", "k-123"));
  EXPECT_FALSE(BearerMatches("k-123", "k-123"));
  EXPECT_FALSE(BearerMatches("Bearer ", "k-123"));
  EXPECT_FALSE(BearerMatches("", "k-123"));
  EXPECT_FALSE(BearerMatches("Basic k-123", "k-123"));
}

}  // namespace
}  // namespace beacon
