// AtomicFileWriter: the destination changes only at commit(), and no temporary file outlives a writer.
#include "dpscope/base/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

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
// its process still runs (then it may be a write in progress). Such files used to be never cleaned.
// `trace merge DIR /dev/full` as root once replaced the machine's /dev/full with a regular file:
// a FIFO, a directory or a device is never renamed over.
TEST(AtomicFileWriter, NeverReplacesAFifo) {
  TempDir dir;
  const auto fifo = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_DPS_ERROR(AtomicFileWriter out(fifo), ErrorKind::kUsage,
                   fifo.string() + ": is a FIFO (named pipe), not a regular file; refusing to write over it");
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(dir.files(), std::vector<std::string>{"pipe"});
}

TEST(AtomicFileWriter, NeverReplacesADirectory) {
  TempDir dir;
  std::filesystem::create_directory(dir.path() / "sub");
  EXPECT_DPS_ERROR(AtomicFileWriter out(dir.path() / "sub"), ErrorKind::kUsage,
                   (dir.path() / "sub").string() + ": is a directory; refusing to write over it");
}

// A device the user names under /dev is written in place: nothing is created beside it or renamed.
TEST(AtomicFileWriter, WritesADeviceInPlace) {
  AtomicFileWriter out("/dev/null");
  EXPECT_TRUE(out.in_place());
  EXPECT_TRUE(out.temp_path().empty());
  out.write("discarded");
  out.commit();
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// A full device reports the system's reason, and stays a device.
TEST(AtomicFileWriter, AFullDeviceFailsWithTheSystemsReason) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  AtomicFileWriter out("/dev/full");
  EXPECT_DPS_ERROR(out.write(std::string(100, 'x')), ErrorKind::kWriteFailed,
                   "/dev/full: write failed after 0 bytes: No space left on device");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

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

// `trace export` killed while it wrote left OUT.tmp.PID.0 for good: later exports to OUT never
// removed it. The next writer of a file removes what dead writers of it left.
TEST(AtomicFileWriter, TheNextWriterRemovesADeadWritersTemporaryFile) {
  TempDir dir;
  write_bytes(dir.path() / "ev.json.tmp.99999999.0", "a killed export's half");
  write_bytes(dir.path() / "ev.json.tmp.1.0", "a live process's");
  write_bytes(dir.path() / "other.json.tmp.99999999.0", "another file's");
  AtomicFileWriter out(dir.path() / "ev.json");
  out.write("{}");
  out.commit();
  EXPECT_EQ(dir.files(),
            (std::vector<std::string>{"ev.json", "ev.json.tmp.1.0", "other.json.tmp.99999999.0"}));
}

TEST(RemoveStaleTempFiles, MissingDirectoryRemovesNothing) {
  TempDir dir;
  EXPECT_TRUE(remove_stale_temp_files(dir.path() / "absent", "").empty());
}

}  // namespace
}  // namespace dpscope
