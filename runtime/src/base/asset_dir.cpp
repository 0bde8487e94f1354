// The asset directory (base/asset_dir.hpp).
#include "dpscope/base/asset_dir.hpp"

#include <cstdlib>
#include <system_error>

#include "dpscope/base/process.hpp"

#ifndef DPSCOPE_SOURCE_ASSET_DIR
#define DPSCOPE_SOURCE_ASSET_DIR ""
#endif

namespace dpscope {

namespace fs = std::filesystem;

fs::path asset_dir() {
  if (const char* env = std::getenv("DPSCOPE_ASSETS"); env && *env) return fs::path(env);
  std::error_code ec;
  if (fs::path src = DPSCOPE_SOURCE_ASSET_DIR; !src.empty() && fs::is_directory(src / "presets", ec))
    return src;
  return executable_dir() / ".." / "share" / "dpscope";
}

}  // namespace dpscope
