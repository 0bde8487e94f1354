// AtomicFileWriter: the destination changes only at commit(), and no temporary file outlives a writer.
#include "dpscope/io/atomic_file.hpp"

#include <gtest/gtest.h>

#include "runtime/io/io_test_util.hpp"

namespace dpscope {
namespace {

using testing::read_bytes;
using testing::TempDir;
using testing::write_bytes;

TEST(AtomicFileWriter, DestinationKeepsOldContentUntilCommit) {
  TempDir dir;
  const auto path = dir.path() / "ckpt.bin";
  write_bytes(path, "old");
  AtomicFileWriter out(path);
  out.write("new content");
  EXPECT_EQ(read_bytes(path), "old");
  EXPECT_EQ(read_bytes(out.temp_path()), "new content");
  EXPECT_EQ(out.temp_path().parent_path(), dir.path());  // same directory: the rename stays on one filesystem
  out.commit();
  EXPECT_EQ(read_bytes(path), "new content");
  EXPECT_EQ(out.bytes_written(), 11u);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"ckpt.bin"});
}

TEST(AtomicFileWriter, AbandonedWriterRemovesItsTemporaryFile) {
  TempDir dir;
  const auto path = dir.path() / "ckpt.bin";
  write_bytes(path, "old");
  {
    AtomicFileWriter out(path);
    out.write("half of a checkpoint");
    // an exception here would unwind without commit()
  }
  EXPECT_EQ(read_bytes(path), "old");
  EXPECT_EQ(dir.files(), std::vector<std::string>{"ckpt.bin"});
}

TEST(AtomicFileWriter, CreatesANewFile) {
  TempDir dir;
  AtomicFileWriter out(dir.path() / "fresh.bin");
  out.write(std::string(1000, 'x'));
  out.commit();
  EXPECT_EQ(std::filesystem::file_size(dir.path() / "fresh.bin"), 1000u);
}

TEST(AtomicFileWriter, UnwritableDirectoryIsAnIoError) {
  TempDir dir;
  const auto path = dir.path() / "missing" / "x.bin";
  EXPECT_DPS_ERROR(AtomicFileWriter out(path), ErrorKind::kIo,
                   path.string() + ": cannot create a file in '" + (dir.path() / "missing").string() +
                       "': No such file or directory");
}

TEST(AtomicFileWriter, CommitTwiceIsAProgrammerError) {
  TempDir dir;
  AtomicFileWriter out(dir.path() / "x.bin");
  out.commit();
  EXPECT_THROW(out.commit(), Error);
  EXPECT_THROW(out.write("late"), Error);
}

// A writer killed before commit() leaves "<name>.tmp.<pid>.<n>"; the next sweep removes it unless
// its process still runs (then it may be a write in progress). Issue 9: such files were never cleaned.
TEST(RemoveStaleTempFiles, RemovesOnlyDeadWritersFilesWithThePrefix) {
  TempDir dir;
  // pid 99999999 is above Linux's pid_max (4194304), so no such process exists; pid 1 always does.
  write_bytes(dir.path() / "checkpoint-00000005.safetensors.tmp.99999999.3", "partial");
  write_bytes(dir.path() / "checkpoint-00000005.safetensors.tmp.1.0", "in progress elsewhere");
  write_bytes(dir / ("checkpoint-00000006.safetensors.tmp." + std::to_string(::getpid()) + ".0"), "mine");
  write_bytes(dir.path() / "weights.safetensors.tmp.99999999.0", "another prefix");
  write_bytes(dir.path() / "checkpoint-00000007.safetensors.tmp.x.0", "not a pid");
  write_bytes(dir.path() / "checkpoint-00000007.safetensors", "a real file");
  const std::vector<std::filesystem::path> removed = remove_stale_temp_files(dir.path(), "checkpoint-");
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], dir.path() / "checkpoint-00000005.safetensors.tmp.99999999.3");
  EXPECT_EQ(dir.files(), (std::vector<std::string>{
                             "checkpoint-00000005.safetensors.tmp.1.0",
                             "checkpoint-00000006.safetensors.tmp." + std::to_string(::getpid()) + ".0",
                             "checkpoint-00000007.safetensors",
                             "checkpoint-00000007.safetensors.tmp.x.0",
                             "weights.safetensors.tmp.99999999.0",
                         }));
}

TEST(RemoveStaleTempFiles, MissingDirectoryRemovesNothing) {
  TempDir dir;
  EXPECT_TRUE(remove_stale_temp_files(dir.path() / "absent", "").empty());
}

}  // namespace
}  // namespace dpscope
