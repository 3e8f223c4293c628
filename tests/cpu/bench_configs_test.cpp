// The benchmark's --configs grammar (bench/bench_configs.h): the benchmark shapes, NxP items and ragged
// P:R1/R2/... items, their names and layouts, and the rejection of malformed items.
#include "bench_configs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dualkv::bench {
namespace {

TEST(BenchConfigs, AllIsDesignsFiveShapes) {
  const std::vector<BenchConfig> configs = parse_configs("all");
  ASSERT_EQ(configs.size(), 5u);
  EXPECT_EQ(configs[0].name(), "N28_P4096");
  EXPECT_EQ(configs[4].name(), "N16_P65536");
  for (const BenchConfig& config : configs) EXPECT_TRUE(config.response_lengths.empty());
}

TEST(BenchConfigs, UniformItemKeepsDesignsResponseLength) {
  const std::vector<BenchConfig> configs = parse_configs("3x100,2x7");
  ASSERT_EQ(configs.size(), 2u);
  EXPECT_EQ(configs[0].name(), "N3_P100");
  const Layout layout = configs[0].layout();
  EXPECT_EQ(layout.total_tokens(), 100 + 3 * BenchConfig{}.response);
  EXPECT_EQ(configs[1].responses, 2);
  EXPECT_EQ(configs[1].prompt, 7);
}

TEST(BenchConfigs, RaggedItemLaysOutTheGivenLengths) {
  const std::vector<BenchConfig> configs = parse_configs("8192:131/2048/17,5:1");
  ASSERT_EQ(configs.size(), 2u);
  const BenchConfig& ragged = configs[0];
  EXPECT_EQ(ragged.responses, 3);
  EXPECT_EQ(ragged.prompt, 8192);
  EXPECT_EQ(ragged.response_lengths, (std::vector<int64_t>{131, 2048, 17}));
  EXPECT_EQ(ragged.name(), "N3_P8192_R17-2048");
  const Layout layout = ragged.layout();
  EXPECT_EQ(layout.total_tokens(), 8192 + 131 + 2048 + 17);
  // Each response sees the prompt and itself causally: R * P + R (R + 1) / 2 pairs.
  int64_t pairs = int64_t{8192} * 8193 / 2;
  for (const int64_t r : ragged.response_lengths) pairs += r * 8192 + r * (r + 1) / 2;
  EXPECT_EQ(layout.visible_pairs(), pairs);
  EXPECT_EQ(configs[1].name(), "N1_P5_R1-1");
}

TEST(BenchConfigs, HeadDimOtherThanDesignsIsNamed) {
  BenchConfig config = parse_configs("4:2/3").front();
  config.head_dim = 64;
  EXPECT_EQ(config.name(), "N2_P4_R2-3_d64");
}

TEST(BenchConfigs, HeadsOtherThanDesignsAreNamed) {
  BenchConfig config = parse_configs("32x8192").front();
  config.heads = 24;
  config.kv_heads = 4;
  config.head_dim = 256;
  EXPECT_EQ(config.name(), "N32_P8192_H24k4_d256");
}

TEST(BenchConfigs, MalformedItemsAreRejectedWithTheItem) {
  for (const std::string text : {"", "28", "28x", "x4096", "0x4096", "28x-1", "4096:", "4096:12//3", "4096:0", ":12",
                                 "4096:1.5", "28x4096,", "4096:12/", "1234567890x4"}) {
    try {
      parse_configs(text);
      ADD_FAILURE() << "accepted '" << text << "'";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("--configs"), std::string::npos) << error.what();
    }
  }
}

}  // namespace
}  // namespace dualkv::bench
