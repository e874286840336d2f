// server/ops/front_door.h: the part of a request's way in that both front
// ends share: the caller's partition from its key, the prepared request, and
// one count per refusal. Uses the default model's tokenizer.
#include "server/ops/front_door.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/engine/default_model.h"

namespace beacon {
namespace {

FrontDoor Door(bool per_key, std::vector<absl::Status>* refused) {
  FrontDoor d;
  d.api_keys = ApiKeys({"key-a", "key-b"});
  d.prefix_cache_salt_per_key = per_key;
  d.on_rejected = [refused](const absl::Status& s) { refused->push_back(s); };
  return d;
}

TEST(FrontDoorTest, TenantIsTheKeysOnlyUnderSaltPerKey) {
  std::vector<absl::Status> refused;
  const FrontDoor shared = Door(false, &refused), per_key = Door(true, &refused);
  EXPECT_EQ(shared.TenantOf("Bearer key-a"), 0u);
  const uint64_t a = per_key.TenantOf("Bearer key-a"), b = per_key.TenantOf("Bearer key-b");
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  EXPECT_EQ(per_key.TenantOf("Bearer key-a"), a);  // stable
  EXPECT_TRUE(refused.empty());
}

TEST(FrontDoorTest, PrepareSetsTheTenantAndCountsEachRefusalOnce) {
  Runtime* rt = testing::DefaultModel();
  if (rt == nullptr) GTEST_SKIP() << "models/default.gguf missing";
  std::vector<absl::Status> refused;
  FrontDoor door = Door(true, &refused);
  door.limits.context_length = rt->config().context_length;
  door.limits.default_max_tokens = 8;
  ServeRequest r;
  r.input = ServeRequest::Input::kText;
  r.text = "hello";
  r.request_id = "req-1";
  absl::StatusOr<PreparedRequest> p = door.Prepare(r, "Bearer key-b", *rt->tokenizer());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(r.tenant, door.TenantOf("Bearer key-b"));
  EXPECT_TRUE(refused.empty());

  r.max_tokens = -3;
  p = door.Prepare(r, "Bearer key-b", *rt->tokenizer());
  ASSERT_FALSE(p.ok());
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0], p.status());
}

}  // namespace
}  // namespace beacon
