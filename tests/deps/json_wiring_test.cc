// Wiring test for nlohmann/json: parse, navigate, reject malformed input and
// round-trip through dump().
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace {

TEST(JsonWiringTest, ParsesAndRoundTrips) {
  const auto plan = nlohmann::json::parse(R"({"version": 1, "mesh": {"shape": [2, 4]}})");
  EXPECT_EQ(plan.at("version").get<int>(), 1);
  EXPECT_EQ(plan.at("mesh").at("shape").at(1).get<int>(), 4);
  EXPECT_EQ(nlohmann::json::parse(plan.dump()), plan);
}

TEST(JsonWiringTest, MalformedInputReportsPosition) {
  const auto parsed = nlohmann::json::parse("{\"version\": }", nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(parsed.is_discarded());
}

}  // namespace
