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

TEST(ApiKeysTest, MatchNamesTheKeyAndEmptyKeysAreDropped) {
  const ApiKeys none;
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(none.Allows(""));
  EXPECT_EQ(none.Match("Bearer x"), -1);

  const ApiKeys keys({"k-alpha", "", "k-beta"});
  EXPECT_EQ(keys.size(), 2);
  EXPECT_EQ(keys.Match("Bearer k-alpha"), 0);
  EXPECT_EQ(keys.Match("Bearer k-beta"), 1);
  EXPECT_EQ(keys.Match("Bearer k-gamma"), -1);
  EXPECT_EQ(keys.Match("Bearer "), -1);  // the dropped empty key lets nothing in
  EXPECT_FALSE(keys.Allows(""));
  EXPECT_TRUE(keys.Allows("Bearer k-beta"));
}

TEST(ApiKeysTest, TenantsAreNonzeroDistinctAndIndependentOfOrder) {
  const ApiKeys ab({"k-alpha", "k-beta"});
  const ApiKeys ba({"k-beta", "k-alpha"});
  EXPECT_NE(ab.Tenant(0), 0u);
  EXPECT_NE(ab.Tenant(0), ab.Tenant(1));
  EXPECT_EQ(ab.Tenant(0), ba.Tenant(1));
  EXPECT_EQ(ab.Tenant(1), ba.Tenant(0));
  EXPECT_EQ(ab.Tenant(-1), 0u);  // no key matched: no tenant
}

}  // namespace
}  // namespace beacon
