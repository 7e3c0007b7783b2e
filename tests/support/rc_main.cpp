// The main() of every GoogleTest binary. RapidCheck reads its configuration from RC_PARAMS; ctest
// hands each test the tier's case count in DCP_RC_TIER_PARAMS (cmake/DcpTesting.cmake), which is
// used only when the caller did not set RC_PARAMS, so RC_PARAMS="reproduce=..." replays a failure.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  const char* tier = std::getenv("DCP_RC_TIER_PARAMS");
  if (tier != nullptr && std::getenv("RC_PARAMS") == nullptr) setenv("RC_PARAMS", tier, 1);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
