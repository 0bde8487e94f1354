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
  const auto path = dir / "ckpt.bin";
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
  const auto path = dir / "ckpt.bin";
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
  AtomicFileWriter out(dir / "fresh.bin");
  out.write(std::string(1000, 'x'));
  out.commit();
  EXPECT_EQ(std::filesystem::file_size(dir / "fresh.bin"), 1000u);
}

TEST(AtomicFileWriter, UnwritableDirectoryIsAnIoError) {
  TempDir dir;
  const auto path = dir / "missing" / "x.bin";
  EXPECT_DPS_ERROR(AtomicFileWriter out(path), ErrorKind::kIo,
                   path.string() + ": cannot create a file in '" + (dir / "missing").string() +
                       "': No such file or directory");
}

TEST(AtomicFileWriter, CommitTwiceIsAProgrammerError) {
  TempDir dir;
  AtomicFileWriter out(dir / "x.bin");
  out.commit();
  EXPECT_THROW(out.commit(), Error);
  EXPECT_THROW(out.write("late"), Error);
}

}  // namespace
}  // namespace dpscope
