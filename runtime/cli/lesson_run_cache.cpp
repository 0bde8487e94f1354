// Reused scenario traces (lesson_run_cache.hpp).
#include "lesson_run_cache.hpp"

#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "dpscope/base/atomic_file.hpp"
#include "dpscope/base/error.hpp"

namespace dpscope::cli {

namespace fs = std::filesystem;

namespace {

// The command line as one text, each argument ended by a NUL (no argument holds one).
std::string joined(const std::vector<std::string>& args) {
  std::string text;
  for (const std::string& a : args) {
    text += a;
    text += '\0';
  }
  return text;
}

// FNV-1a, 64 bits: a file name for the command line (the entry's .args file holds the line
// itself, so two lines with one hash never share a trace).
uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 14695981039346656037ull;
  for (const unsigned char c : text) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

// The file's bytes, or nullopt when it cannot be read.
std::optional<std::string> read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return std::nullopt;
  return bytes;
}

void write_all(const fs::path& path, const std::string& bytes) {
  AtomicFileWriter writer(path);
  writer.write(bytes);
  writer.commit();
}

}  // namespace

LessonRunCache::LessonRunCache(fs::path dir) : dir_(std::move(dir)) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  DPS_CHECK(fs::is_directory(dir_, ec), ErrorKind::kUsage, "--reuse-runs {}: not a directory{}",
            dir_.string(), ec ? fmt::format(" ({})", ec.message()) : std::string());
}

fs::path LessonRunCache::entry(const std::vector<std::string>& args, const char* suffix) const {
  return dir_ / fmt::format("{:016x}{}", fnv1a(joined(args)), suffix);
}

bool LessonRunCache::restore(const std::vector<std::string>& args, const fs::path& trace) const {
  const std::optional<std::string> kept_args = read_all(entry(args, ".args"));
  if (!kept_args || *kept_args != joined(args)) return false;
  const std::optional<std::string> bytes = read_all(entry(args, ".trace.jsonl"));
  if (!bytes) return false;
  write_all(trace, *bytes);
  return true;
}

void LessonRunCache::keep(const std::vector<std::string>& args, const fs::path& trace,
                          const std::string& clock) const {
  if (clock != "simulated") return;
  const std::optional<std::string> bytes = read_all(trace);
  if (!bytes) return;
  // The trace first: an .args file names an entry only once its trace is complete.
  write_all(entry(args, ".trace.jsonl"), *bytes);
  write_all(entry(args, ".args"), joined(args));
}

}  // namespace dpscope::cli
