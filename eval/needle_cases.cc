#include "eval/needle_cases.h"

#include <array>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "util/splitmix.h"

namespace beacon::eval {
namespace {

// SplitMix64 (a fixed, published mixing function): deterministic everywhere.
class Draws {
 public:
  Draws(uint64_t seed, int32_t id) : state_(seed ^ (0x9e3779b97f4a7c15ULL * (static_cast<uint64_t>(id) + 1))) {}

  uint64_t Next() {
    const uint64_t z = SplitMix64(state_);
    state_ += kSplitMixGamma;
    return z;
  }
  // Uniform enough in [0, n) for n far below 2^64. REQUIRES n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

  template <typename T, size_t N>
  const T& Pick(const std::array<T, N>& a) {
    return a[Below(N)];
  }

 private:
  uint64_t state_;
};

constexpr std::array<const char*, 6> kTopics = {
    "a lighthouse keeper who finds a strange map", "two friends crossing a desert on foot",
    "a small bakery in a mountain town",           "a ship lost in a storm",
    "a girl who builds a robot from spare parts",  "a village preparing for a long winter",
};
constexpr std::array<const char*, 4> kNameSubjects = {"the courier's name", "the librarian's name",
                                                      "the captain's name", "the doctor's name"};
constexpr std::array<const char*, 4> kNumberSubjects = {"the locker number", "the room number", "the ticket number",
                                                        "the house number"};
constexpr std::array<const char*, 4> kCodeSubjects = {"the access code", "the safe code", "the gate code",
                                                      "the serial code"};
constexpr std::array<const char*, 16> kFirstNames = {"Mara",  "Tobias", "Ingrid", "Felix", "Priya", "Oskar",
                                                     "Lena",  "Rafael", "Helga",  "Jonas", "Amara", "Viktor",
                                                     "Sofia", "Henrik", "Nadia",  "Elias"};
constexpr std::array<const char*, 16> kLastNames = {
    "Lindqvist", "Okafor", "Brennan",  "Castillo", "Hartmann",  "Novak",   "Delacroix", "Sato",
    "Fischer",   "Moreau", "Kowalski", "Abara",    "Whitfield", "Petrova", "Halvorsen", "Quint"};
// No I or O (read as 1 or 0) and no 0 or 1 in codes.
constexpr std::string_view kCodeLetters = "ABCDEFGHJKLMNPQRSTUVWXYZ";
constexpr std::string_view kCodeDigits = "23456789";

}  // namespace

std::string_view FactKindName(FactKind kind) {
  switch (kind) {
    case FactKind::kName: return "name";
    case FactKind::kNumber: return "number";
    case FactKind::kCode: return "code";
  }
  return "?";
}

NeedleCase MakeNeedleCase(uint64_t seed, int32_t id) {
  Draws d(seed, id);
  NeedleCase c;
  c.id = id;
  c.kind = static_cast<FactKind>(id % 3);
  std::string subject;
  switch (c.kind) {
    case FactKind::kName:
      subject = d.Pick(kNameSubjects);
      c.answer = absl::StrCat(d.Pick(kFirstNames), " ", d.Pick(kLastNames));
      break;
    case FactKind::kNumber:
      subject = d.Pick(kNumberSubjects);
      c.answer = absl::StrCat(1000 + d.Below(9000));
      break;
    case FactKind::kCode:
      subject = d.Pick(kCodeSubjects);
      for (int i = 0; i < 4; ++i) {
        const std::string_view set = i % 2 == 0 ? kCodeLetters : kCodeDigits;
        c.answer += set[d.Below(set.size())];
      }
      break;
  }
  c.prompt = absl::StrCat("Write a long, detailed story about ", d.Pick(kTopics), ".");
  c.fact = absl::StrCat("Note for later: ", subject, " is ", c.answer, ". Now, the story.\n\n");
  c.cue = absl::StrCat("\n\nAs noted at the start, ", subject, " is");
  c.filler_seed = d.Next();
  return c;
}

bool AnswerMatches(std::string_view generated, std::string_view answer) {
  if (answer.empty()) return false;
  std::string_view text = generated;
  while (!text.empty() && absl::ascii_isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  if (text.substr(0, answer.size()) != answer) return false;
  return text.size() == answer.size() || !absl::ascii_isalnum(static_cast<unsigned char>(text[answer.size()]));
}

}  // namespace beacon::eval
