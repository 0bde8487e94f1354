// The colour code reads for colour-blind students: CIEDE2000 is checked against the published test
// pairs, then every pair of colours that carry different meanings (phases and kinds of work, bucket
// states, ranks 0..7, the playhead against every lane colour) must stay at least
// kMinDifference apart under simulated protanopia, deuteranopia and tritanopia (Machado et al.
// 2009, severity 1.0), in the normal and the classroom palette.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "ui/color_vision.hpp"
#include "ui/palette.hpp"

namespace dpscope::viz {
namespace {

// Well past "just noticeable" (about 1) and past what a glance at a small chip needs: the pairs the
// review found unreadable (forward vs backward under deuteranopia) were 3.4 apart.
constexpr double kMinDifference = 10.0;

// Sharma, Wu, Dalal 2005, Table 1: L1 a1 b1, L2 a2 b2, and the CIEDE2000 difference.
struct SharmaPair {
  Lab x, y;
  double expected;
};
constexpr SharmaPair kSharma[] = {
    {{50.0000, 2.6772, -79.7751}, {50.0000, 0.0000, -82.7485}, 2.0425},
    {{50.0000, 3.1571, -77.2803}, {50.0000, 0.0000, -82.7485}, 2.8615},
    {{50.0000, 2.8361, -74.0200}, {50.0000, 0.0000, -82.7485}, 3.4412},
    {{50.0000, -1.3802, -84.2814}, {50.0000, 0.0000, -82.7485}, 1.0000},
    {{50.0000, -1.1848, -84.8006}, {50.0000, 0.0000, -82.7485}, 1.0000},
    {{50.0000, -0.9009, -85.5211}, {50.0000, 0.0000, -82.7485}, 1.0000},
    {{50.0000, 0.0000, 0.0000}, {50.0000, -1.0000, 2.0000}, 2.3669},
    {{50.0000, -1.0000, 2.0000}, {50.0000, 0.0000, 0.0000}, 2.3669},
    {{50.0000, 2.4900, -0.0010}, {50.0000, -2.4900, 0.0009}, 7.1792},
    {{50.0000, 2.4900, -0.0010}, {50.0000, -2.4900, 0.0010}, 7.1792},
    {{50.0000, 2.4900, -0.0010}, {50.0000, -2.4900, 0.0011}, 7.2195},
    {{50.0000, 2.4900, -0.0010}, {50.0000, -2.4900, 0.0012}, 7.2195},
    {{50.0000, -0.0010, 2.4900}, {50.0000, 0.0009, -2.4900}, 4.8045},
    {{50.0000, -0.0010, 2.4900}, {50.0000, 0.0010, -2.4900}, 4.8045},
    {{50.0000, -0.0010, 2.4900}, {50.0000, 0.0011, -2.4900}, 4.7461},
    {{50.0000, 2.5000, 0.0000}, {50.0000, 0.0000, -2.5000}, 4.3065},
    {{50.0000, 2.5000, 0.0000}, {73.0000, 25.0000, -18.0000}, 27.1492},
    {{50.0000, 2.5000, 0.0000}, {61.0000, -5.0000, 29.0000}, 22.8977},
    {{50.0000, 2.5000, 0.0000}, {56.0000, -27.0000, -3.0000}, 31.9030},
    {{50.0000, 2.5000, 0.0000}, {58.0000, 24.0000, 15.0000}, 19.4535},
    {{50.0000, 2.5000, 0.0000}, {50.0000, 3.1736, 0.5854}, 1.0000},
    {{50.0000, 2.5000, 0.0000}, {50.0000, 3.2972, 0.0000}, 1.0000},
    {{50.0000, 2.5000, 0.0000}, {50.0000, 1.8634, 0.5757}, 1.0000},
    {{50.0000, 2.5000, 0.0000}, {50.0000, 3.2592, 0.3350}, 1.0000},
    {{60.2574, -34.0099, 36.2677}, {60.4626, -34.1751, 39.4387}, 1.2644},
    {{63.0109, -31.0961, -5.8663}, {62.8187, -29.7946, -4.0864}, 1.2630},
    {{61.2901, 3.7196, -5.3901}, {61.4292, 2.2480, -4.9620}, 1.8731},
    {{35.0831, -44.1164, 3.7933}, {35.0232, -40.0716, 1.5901}, 1.8645},
    {{22.7233, 20.0904, -46.6940}, {23.0331, 14.9730, -42.5619}, 2.0373},
    {{36.4612, 47.8580, 18.3852}, {36.2715, 50.5065, 21.2231}, 1.4146},
    {{90.8027, -2.0831, 1.4410}, {91.1528, -1.6435, 0.0447}, 1.4441},
    {{90.9257, -0.5406, -0.9208}, {88.6381, -0.8985, -0.7239}, 1.5381},
    {{6.7747, -0.2908, -2.4247}, {5.8714, -0.0985, -2.2286}, 0.6377},
    {{2.0776, 0.0795, -1.1350}, {0.9033, -0.0636, -0.5514}, 0.9082},
};

TEST(ColorVision, Ciede2000MatchesEverySharmaTestPairBothWays) {
  int i = 1;
  for (const SharmaPair& p : kSharma) {
    EXPECT_NEAR(ciede2000(p.x, p.y), p.expected, 1e-4) << "Sharma et al. 2005 pair " << i;
    EXPECT_NEAR(ciede2000(p.y, p.x), p.expected, 1e-4) << "Sharma et al. 2005 pair " << i << " reversed";
    ++i;
  }
}

TEST(ColorVision, SrgbToLabMatchesKnownValues) {
  // White is L 100 with no chroma; sRGB red is (53.24, 80.09, 67.20) (CIE 15:2004 with D65).
  const Lab white = to_lab({255, 255, 255});
  EXPECT_NEAR(white.l, 100.0, 1e-3);
  EXPECT_NEAR(white.a, 0.0, 1e-2);
  EXPECT_NEAR(white.b, 0.0, 1e-2);
  const Lab red = to_lab({255, 0, 0});
  EXPECT_NEAR(red.l, 53.24, 0.02);
  EXPECT_NEAR(red.a, 80.09, 0.05);
  EXPECT_NEAR(red.b, 67.20, 0.05);
}

TEST(ColorVision, SimulationKeepsGreysAndMergesTheClassicConfusions) {
  // Greys are on every confusion line: each simulation leaves them (almost) where they are.
  for (ColorVision v : kColorVisions)
    EXPECT_LT(ciede2000(seen_as({128, 128, 128}, v), to_lab({128, 128, 128})), 1.0) << to_string(v);
  // Red against green is obvious with normal vision and collapses for the red-green deficiencies,
  // not for tritanopia (the test would pass with a simulation that does nothing otherwise).
  const Rgb8 red{200, 60, 40};
  const Rgb8 green{100, 130, 40};
  EXPECT_GT(ciede2000(to_lab(red), to_lab(green)), 30.0);
  EXPECT_LT(ciede2000(seen_as(red, ColorVision::kDeuteranopia), seen_as(green, ColorVision::kDeuteranopia)),
            12.0);
  EXPECT_LT(ciede2000(seen_as(red, ColorVision::kProtanopia), seen_as(green, ColorVision::kProtanopia)),
            15.0);
  EXPECT_GT(ciede2000(seen_as(red, ColorVision::kTritanopia), seen_as(green, ColorVision::kTritanopia)),
            25.0);
}

Rgb8 rgb_of(ImU32 c) {
  return Rgb8{static_cast<uint8_t>((c >> IM_COL32_R_SHIFT) & 0xFF),
              static_cast<uint8_t>((c >> IM_COL32_G_SHIFT) & 0xFF),
              static_cast<uint8_t>((c >> IM_COL32_B_SHIFT) & 0xFF)};
}

using Named = std::vector<std::pair<std::string, ImU32>>;

// The smallest difference between any two of `a` (or, with `b`, between one of `a` and one of `b`)
// under every kind of vision, with the pair that has it in the failure message.
void expect_told_apart(const std::string& what, const Named& a, const Named* b = nullptr) {
  for (ColorVision v : kColorVisions) {
    for (size_t i = 0; i < a.size(); ++i) {
      const Named& others = b != nullptr ? *b : a;
      for (size_t j = b != nullptr ? 0 : i + 1; j < others.size(); ++j) {
        const double d = ciede2000(seen_as(rgb_of(a[i].second), v), seen_as(rgb_of(others[j].second), v));
        EXPECT_GE(d, kMinDifference) << what << ": " << a[i].first << " vs " << others[j].first << " under "
                                     << to_string(v) << " are only " << d << " apart";
      }
    }
  }
}

class PaletteColourBlindness : public ::testing::TestWithParam<bool> {
 protected:
  Palette palette() const { return GetParam() ? Palette::classroom() : Palette::normal(); }
};

TEST_P(PaletteColourBlindness, KindsOfWorkStayApart) {
  const Palette p = palette();
  // Phase pills, timeline spans, card borders and stream squares all use these.
  expect_told_apart("kinds of work", {{"forward", p.forward},
                                      {"backward", p.backward},
                                      {"optimizer", p.optimizer},
                                      {"data loading", p.data},
                                      {"collectives", p.comm},
                                      {"copies", p.copy},
                                      {"reduction kernels", p.reduce},
                                      {"idle", p.idle}});
}

TEST_P(PaletteColourBlindness, MemoryCategoriesStayApart) {
  const Palette p = palette();
  Named memory;
  for (int c = 0; c < kMemoryCategoryCount; ++c)
    memory.emplace_back(to_string(static_cast<MemoryCategory>(c)), p.memory[static_cast<size_t>(c)]);
  expect_told_apart("memory categories", memory);
}

TEST_P(PaletteColourBlindness, BucketStatesStayApart) {
  const Palette p = palette();
  expect_told_apart("bucket states", {{"pending", p.bucket_color(BucketState::kPending)},
                                      {"ready", p.bucket_color(BucketState::kReady)},
                                      {"launched", p.bucket_color(BucketState::kLaunched)},
                                      {"done", p.bucket_color(BucketState::kDone)}});
}

TEST_P(PaletteColourBlindness, RanksUpToEightStayApart) {
  const Palette p = palette();
  Named ranks;
  for (int r = 0; r < 8; ++r) ranks.emplace_back("rank " + std::to_string(r), p.rank_color(r));
  expect_told_apart("ranks", ranks);
  // Rank 8 takes rank 0's colour again: its number tells it apart.
  EXPECT_EQ(p.rank_color(8), p.rank_color(0));
}

TEST_P(PaletteColourBlindness, ThePlayheadStandsOutFromEveryLane) {
  const Palette p = palette();
  const Named playhead = {{"playhead", p.playhead}};
  const Named lanes = {{"canvas", p.background},   {"forward", p.forward},   {"backward", p.backward},
                       {"optimizer", p.optimizer}, {"data loading", p.data}, {"collectives", p.comm},
                       {"copies", p.copy},         {"reduction", p.reduce},  {"idle", p.idle},
                       {"merged", p.merged}};
  expect_told_apart("playhead", playhead, &lanes);
}

INSTANTIATE_TEST_SUITE_P(NormalAndClassroom, PaletteColourBlindness, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& param) {
                           return param.param ? "classroom" : "normal";
                         });

}  // namespace
}  // namespace dpscope::viz
