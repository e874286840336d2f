// Workload generation: KV mixes, exact synthetic prompts, JSONL prompts,
// determinism, and the request message they become.
#include "loadtest/workload.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "loadtest/grpc_client.h"

namespace beacon::loadtest {
namespace workload_test {
namespace {

std::string WriteFile(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << content;
  return path;
}

TEST(KvMixTest, ParsesPoliciesBudgetsAndWeights) {
  absl::StatusOr<std::vector<KvChoice>> m = ParseKvMix("full:1,beacon@256:3,default");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0].policy, "full");
  EXPECT_EQ((*m)[0].budget, 0);
  EXPECT_EQ((*m)[0].weight, 1);
  EXPECT_EQ((*m)[1].policy, "beacon");
  EXPECT_EQ((*m)[1].budget, 256);
  EXPECT_EQ((*m)[1].weight, 3);
  EXPECT_EQ((*m)[1].Label(), "beacon@256");
  EXPECT_EQ((*m)[2].Label(), "default");
}

TEST(KvMixTest, ErrorsNameTheEntry) {
  struct Case {
    const char* spec;
    const char* needle;
  };
  for (const Case& c :
       {Case{"Lru", "'Lru' is not a KV policy name"}, Case{"beacon@0", "budget '0'"}, Case{"beacon@x", "budget 'x'"},
        Case{"full:0", "weight '0'"}, Case{"full,,beacon", "empty entry"}, Case{"full@128", "takes no budget"},
        Case{"", "empty entry"}}) {
    absl::StatusOr<std::vector<KvChoice>> m = ParseKvMix(c.spec);
    ASSERT_FALSE(m.ok()) << c.spec;
    EXPECT_NE(m.status().message().find("--kv-mix"), absl::string_view::npos) << m.status();
    EXPECT_NE(m.status().message().find(c.needle), absl::string_view::npos) << c.spec << ": " << m.status();
  }
}

TEST(WorkloadTest, WeightedMixIsExactAndInterleaved) {
  WorkloadOptions o;
  o.kv_mix = *ParseKvMix("full:1,beacon@64:3");
  Workload w(o);
  std::string seq;
  std::map<std::string, int> counts;
  for (int i = 0; i < 40; ++i) {
    const std::string l = w.Next().kv.Label();
    ++counts[l];
    if (i < 8) seq += l == "full" ? 'F' : 'B';
  }
  EXPECT_EQ(counts["full"], 10);
  EXPECT_EQ(counts["beacon@64"], 30);
  EXPECT_EQ(seq, "BFBBBFBB");  // smooth: interleaved, not 10 of one then 30 of the other
}

TEST(WorkloadTest, SyntheticPromptsHaveExactLengthsAndIdsInRange) {
  WorkloadOptions o;
  o.prompt_len = *LengthDist::Parse("uniform:5:50", "--prompt-len");
  o.output_len = LengthDist::Fixed(7);
  o.token_min = 1000;
  o.token_max = 1100;
  o.ignore_eos = true;
  o.seed = 5;
  Workload a(o), b(o);
  for (int i = 0; i < 200; ++i) {
    const RequestSpec r = a.Next();
    EXPECT_EQ(r.index, i);
    ASSERT_GE(r.tokens.size(), 5u);
    ASSERT_LE(r.tokens.size(), 50u);
    for (int32_t t : r.tokens) {
      ASSERT_GE(t, 1000);
      ASSERT_LT(t, 1100);
    }
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_TRUE(r.ignore_eos);
    EXPECT_TRUE(r.text.empty() && r.chat.empty());
    // Same options and seed: the same request.
    const RequestSpec s = b.Next();
    EXPECT_EQ(r.tokens, s.tokens);
  }
  WorkloadOptions other = o;
  other.seed = 6;
  EXPECT_NE(Workload(o).Next().tokens, Workload(other).Next().tokens);
}

TEST(WorkloadTest, PromptsFileIsUsedInOrderWithItsMaxTokens) {
  const std::string path = WriteFile("prompts.jsonl",
                                     "{\"prompt\": \"def fib(n):\", \"max_tokens\": 12}\n"
                                     "\n"
                                     "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"},"
                                     " {\"role\": \"user\", \"content\": \"Hi\"}]}\n");
  absl::StatusOr<std::vector<PromptEntry>> p = LoadPromptsJsonl(path);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->size(), 2u);
  WorkloadOptions o;
  o.prompts = *p;
  o.output_len = LengthDist::Fixed(33);
  Workload w(o);
  const RequestSpec a = w.Next(), b = w.Next(), c = w.Next();
  EXPECT_EQ(a.text, "def fib(n):");
  EXPECT_EQ(a.max_tokens, 12);
  EXPECT_TRUE(a.tokens.empty());
  ASSERT_EQ(b.chat.size(), 2u);
  EXPECT_EQ(b.chat[1].first, "user");
  EXPECT_EQ(b.chat[1].second, "Hi");
  EXPECT_EQ(b.max_tokens, 33);  // --output-len when the line gives none
  EXPECT_EQ(c.text, a.text);    // cycles
}

TEST(WorkloadTest, BadPromptsFilesNameFileAndLine) {
  EXPECT_EQ(LoadPromptsJsonl("/nonexistent/p.jsonl").status().code(), absl::StatusCode::kNotFound);
  struct Case {
    const char* content;
    const char* needle;
  };
  for (const Case& c :
       {Case{"{\"prompt\": \"a\"}\nnot json\n", ":2: not a JSON object"},
        Case{"{\"text\": \"a\"}\n", ":1: needs \"prompt\" or \"messages\""},
        Case{"{\"prompt\": \"\"}\n", "non-empty string"},
        Case{"{\"messages\": [{\"role\": \"user\"}]}\n", "role\" and \"content"},
        Case{"{\"prompt\": \"a\", \"max_tokens\": 0}\n", "positive integer"}, Case{"\n\n", "has no prompts"}}) {
    const std::string path = WriteFile("bad.jsonl", c.content);
    absl::StatusOr<std::vector<PromptEntry>> p = LoadPromptsJsonl(path);
    ASSERT_FALSE(p.ok()) << c.content;
    EXPECT_NE(p.status().message().find(path), absl::string_view::npos) << p.status();
    EXPECT_NE(p.status().message().find(c.needle), absl::string_view::npos) << c.content << ": " << p.status();
  }
}

TEST(WorkloadTest, ToProtoCarriesInputStoppingAndKv) {
  RequestSpec r;
  r.index = 4;
  r.tokens = {1001, 1002, 1003};
  r.max_tokens = 9;
  r.ignore_eos = true;
  r.kv = KvChoice{"beacon", 64, 1};
  v1::GenerateRequest p = ToProto(r);
  EXPECT_EQ(p.request_id(), "loadtest-4");
  ASSERT_TRUE(p.has_tokens());
  EXPECT_EQ(p.tokens().ids_size(), 3);
  EXPECT_EQ(p.stopping().max_tokens(), 9);
  EXPECT_TRUE(p.stopping().ignore_eos());
  EXPECT_EQ(p.kv().policy(), "beacon");
  EXPECT_EQ(p.kv().budget(), 64);
  // The server's default policy: no KV options at all.
  r.kv = KvChoice{};
  r.tokens.clear();
  r.chat = {{"user", "hello"}};
  p = ToProto(r);
  EXPECT_FALSE(p.kv().has_policy());
  EXPECT_FALSE(p.kv().has_budget());
  ASSERT_TRUE(p.has_chat());
  EXPECT_EQ(p.chat().messages(0).content(), "hello");
}

}  // namespace
}  // namespace workload_test
}  // namespace beacon::loadtest
