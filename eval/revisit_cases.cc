#include "eval/revisit_cases.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/splitmix.h"

namespace beacon::eval {
namespace {

// SplitMix64 over (seed, id): deterministic everywhere.
class Draws {
 public:
  Draws(uint64_t seed, int32_t id) : state_(seed ^ (0xd1b54a32d192ed03ULL * (static_cast<uint64_t>(id) + 1))) {}
  uint64_t Next() {
    const uint64_t z = SplitMix64(state_);
    state_ += kSplitMixGamma;
    return z;
  }
  // REQUIRES n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

constexpr std::array<const char*, 10> kColours = {"red",    "blue",   "green", "yellow", "purple",
                                                  "orange", "silver", "brown", "white",  "black"};
constexpr std::array<const char*, 8> kItems = {"bolts",   "nails",  "screws",  "hinges",
                                               "washers", "rivets", "springs", "clamps"};
// Each names the vault and points back at its code; none restates a digit.
constexpr std::array<const char*, 3> kRevisits = {
    "Here I need the %s again, so I look back at its code in my notes above.\n",
    "The %s comes up once more; its code is the one I wrote down at the start.\n",
    "Before going on, I recall the code of the %s from the list above.\n",
};

std::string Revisit(size_t which, const std::string& subject) {
  std::string t = kRevisits[which];
  t.replace(t.find("%s"), 2, subject);
  return t;
}

// One counting step: two shelves' crates and their sum (numbers of at most
// three digits, so no four-digit value can appear by chance).
std::string Step(int32_t n, Draws& d) {
  const int a = 3 + static_cast<int>(d.Below(40)), b = 3 + static_cast<int>(d.Below(40));
  const char* x = kItems[d.Below(kItems.size())];
  const char* y = kItems[d.Below(kItems.size())];
  switch (d.Below(3)) {
    case 0:
      return absl::StrCat("Step ", n, ": shelf ", n, " holds ", a, " crates of ", x, " and ", b, " crates of ", y,
                          ", so it holds ", a + b, " crates.\n");
    case 1:
      return absl::StrCat("Step ", n, ": on shelf ", n, " I count ", a, " crates of ", x, ", then ", b, " more of ", y,
                          "; together that is ", a + b, ".\n");
    default:
      return absl::StrCat("Step ", n, ": shelf ", n, " has ", a, " crates of ", x, " plus ", b, " of ", y,
                          ", which makes ", a + b, " crates on this shelf.\n");
  }
}

}  // namespace

int32_t AfterStep(int32_t k, int32_t n, int32_t steps) {
  return static_cast<int32_t>(std::clamp<int64_t>(static_cast<int64_t>(k + 1) * steps / (n + 1), 1, steps));
}

absl::Status ValidateRevisitShape(const RevisitShape& s) {
  if (s.facts < 2 || s.facts > static_cast<int32_t>(kColours.size())) {
    return absl::InvalidArgumentError(absl::StrCat("facts: ", s.facts, " is not in 2..", kColours.size()));
  }
  if (s.revisited < 1 || s.revisited >= s.facts) {
    return absl::InvalidArgumentError(
        absl::StrCat("revisited: ", s.revisited, " is not in 1..", s.facts - 1, " (facts - 1: one must stay plain)"));
  }
  if (s.revisits_per_fact < 1) return absl::InvalidArgumentError("revisits_per_fact: must be >= 1");
  if (s.steps < 1) return absl::InvalidArgumentError("steps: must be >= 1");
  return absl::OkStatus();
}

RevisitCase MakeRevisitCase(uint64_t seed, int32_t id, const RevisitShape& shape) {
  Draws d(seed, id);
  RevisitCase c;
  c.id = id;
  // Colours and the revisited set: partial Fisher-Yates shuffles.
  std::array<size_t, kColours.size()> colour;
  for (size_t i = 0; i < colour.size(); ++i) colour[i] = i;
  for (size_t i = 0; i < static_cast<size_t>(shape.facts); ++i)
    std::swap(colour[i], colour[i + d.Below(colour.size() - i)]);
  for (int32_t f = 0; f < shape.facts; ++f) {
    RevisitFact fact;
    fact.subject = absl::StrCat(kColours[colour[f]], " vault");
    for (;;) {
      fact.value = absl::StrCat(1000 + d.Below(9000));
      const bool clash =
          std::any_of(c.facts.begin(), c.facts.end(), [&](const RevisitFact& o) { return o.value == fact.value; });
      if (!clash) break;
    }
    c.facts.push_back(std::move(fact));
  }
  std::vector<int32_t> order(shape.facts);
  for (int32_t i = 0; i < shape.facts; ++i) order[i] = i;
  for (int32_t i = 0; i < shape.revisited; ++i) std::swap(order[i], order[i + d.Below(shape.facts - i)]);
  std::vector<int32_t> revisited(order.begin(), order.begin() + shape.revisited);
  std::sort(revisited.begin(), revisited.end());
  for (int32_t f : revisited) c.facts[f].revisited = true;
  std::vector<int32_t> plain;
  for (int32_t f = 0; f < shape.facts; ++f) {
    if (!c.facts[f].revisited) plain.push_back(f);
  }
  const int32_t ask_rev = revisited[d.Below(revisited.size())], ask_plain = plain[d.Below(plain.size())];
  c.asked = id % 2 == 0 ? std::vector<int32_t>{ask_rev, ask_plain} : std::vector<int32_t>{ask_plain, ask_rev};

  c.prompt = absl::StrCat("Invent a four-digit code for each of ", shape.facts,
                          " vaults and write the codes down. Then count the crates in the storeroom shelf by shelf, "
                          "step by step. At the end I will ask you for some of the codes.");
  auto add = [&](RevisitRole role, int32_t fact, std::string text) {
    c.segments.push_back({role, fact, std::move(text)});
  };
  add(RevisitRole::kText, -1, "First, the codes, so that I can refer back to them.\n");
  for (int32_t f = 0; f < shape.facts; ++f) {
    add(RevisitRole::kText, -1, absl::StrCat("The code of the ", c.facts[f].subject, " is"));
    add(RevisitRole::kValue, f, absl::StrCat(" ", c.facts[f].value));
    add(RevisitRole::kText, -1, ".\n");
  }
  add(RevisitRole::kText, -1, "\nNow the crates, shelf by shelf.\n");
  const int32_t n_mentions = shape.revisited * shape.revisits_per_fact;
  int32_t mention = 0;
  for (int32_t s = 1; s <= shape.steps; ++s) {
    add(RevisitRole::kText, -1, Step(s, d));
    while (mention < n_mentions && AfterStep(mention, n_mentions, shape.steps) <= s) {
      const int32_t f = revisited[mention % revisited.size()];
      add(RevisitRole::kRevisit, f, Revisit(d.Below(kRevisits.size()), c.facts[f].subject));
      ++mention;
    }
  }
  add(RevisitRole::kText, -1, "\nThat finishes the count. Now the codes you asked for.\n");
  for (size_t q = 0; q < c.asked.size(); ++q) {
    const int32_t f = c.asked[q];
    add(RevisitRole::kCue, f, absl::StrCat(q == 0 ? "" : ".\n", "The code of the ", c.facts[f].subject, " is"));
    add(RevisitRole::kAnswer, f, absl::StrCat(" ", c.facts[f].value));
  }
  return c;
}

std::string RevisitText(const RevisitCase& c) {
  std::string out;
  for (const RevisitSegment& s : c.segments) out += s.text;
  return out;
}

}  // namespace beacon::eval
