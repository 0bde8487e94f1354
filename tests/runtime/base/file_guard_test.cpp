// The input and output guards (base/file_guard.hpp): a reader never blocks on a FIFO and says the
// true reason a path cannot be read; an output is never an input, another output, a checkpoint's
// name, a directory or a device node, whatever the spelling.
#include "dpscope/base/file_guard.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <future>

#include "runtime/io/io_test_util.hpp"
#include "support/errors.hpp"

namespace dpscope {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::what_of;
using testing::write_bytes;

// Runs `f` on a thread and fails (instead of hanging the suite) when it has not returned in 5 s.
// A reader blocked on `fifo` is released by opening the FIFO for writing.
std::string what_of_within_seconds(const std::function<void()>& f, const fs::path& fifo) {
  auto result = std::async(std::launch::async, [&] { return what_of(f); });
  if (result.wait_for(std::chrono::seconds(5)) == std::future_status::ready) return result.get();
  ADD_FAILURE() << "still blocked after 5 s on " << fifo;
  const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
  return result.get();
}

// `train --init f` with f a FIFO blocked forever in open(): the type is checked first.
TEST(InputFile, RefusesAFifoWithoutBlocking) {
  TempDir dir;
  const fs::path fifo = dir.path() / "f.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(what_of_within_seconds([&] { InputFile::open(fifo, "--init"); }, fifo),
            "cannot read --init '" + fifo.string() + "': is a FIFO (named pipe), not a regular file");
}

TEST(InputFile, NamesTheTrueReason) {
  TempDir dir;
  const fs::path missing = dir.path() / "missing.npy";
  EXPECT_EQ(what_of([&] { InputFile::open(missing, "--data"); }),
            "cannot read --data '" + missing.string() + "': no such file");
  EXPECT_EQ(what_of([&] { InputFile::open(dir.path(), "trace"); }),
            "cannot read trace '" + dir.path().string() + "': is a directory");
  EXPECT_EQ(what_of([&] { InputFile::open("/dev/zero", "--init"); }),
            "cannot read --init '/dev/zero': is a character device, not a regular file");
  const fs::path loop = dir.path() / "loop";
  fs::create_symlink(loop, loop);
  EXPECT_EQ(what_of([&] { InputFile::open(loop, "checkpoint"); }),
            "cannot read checkpoint '" + loop.string() + "': too many levels of symbolic links");
  const fs::path dangling = dir.path() / "dangling";
  fs::create_symlink(dir.path() / "gone", dangling);
  EXPECT_EQ(what_of([&] { InputFile::open(dangling, ""); }),
            "cannot read '" + dangling.string() + "': is a symbolic link to a missing file");
  const fs::path through_a_file = dir.path() / "file" / "x";
  write_bytes(dir.path() / "file", "x");
  EXPECT_EQ(what_of([&] { InputFile::open(through_a_file, "trace"); }),
            "cannot read trace '" + through_a_file.string() + "': a part of its path is not a directory");
}

TEST(InputFile, ReadsARegularFileAndBoundsItsSize) {
  TempDir dir;
  const fs::path file = dir.path() / "lesson.toml";
  write_bytes(file, "id = \"x\"\n");
  const InputFile in = InputFile::open(file, "lesson file", 9);
  EXPECT_EQ(in.size_bytes(), 9u);
  EXPECT_EQ(in.read_all("lesson file"), "id = \"x\"\n");
  EXPECT_EQ(what_of([&] { InputFile::open(file, "lesson file", 8); }),
            "cannot read lesson file '" + file.string() +
                "': it holds 9 bytes, more than the 8 bytes such a file may have");
}

TEST(WrittenInPlace, OnlyDevicesNamedUnderDev) {
  EXPECT_TRUE(written_in_place("/dev/null"));
  EXPECT_TRUE(written_in_place("/dev/full"));
  EXPECT_FALSE(written_in_place("/dev"));  // a directory
  TempDir dir;
  const fs::path fifo = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(written_in_place(fifo));  // a FIFO outside /dev: refused, never opened
  EXPECT_FALSE(written_in_place(dir.path() / "out.jsonl"));
  // A FIFO made under /dev (/dev/shm is a tmpfs anyone may write) is a FIFO like the others:
  // `bench --trace /dev/shm/f` printed its table's header, then said "no process reads it".
  const fs::path shm = fs::path("/dev/shm") / ("dpscope-fifo-" + std::to_string(::getpid()));
  if (::mkfifo(shm.c_str(), 0600) == 0) {
    EXPECT_FALSE(written_in_place(shm));
    OutputGuard guard;
    guard.add_output("--trace", shm);
    EXPECT_EQ(what_of([&] { guard.check(); }),
              "--trace " + shm.string() +
                  ": is a FIFO (named pipe), not a regular file; refusing to write over it");
    fs::remove(shm);
  }
}

// One guard, each rule named in its message.
class OutputGuardTest : public ::testing::Test {
 protected:
  fs::path at(const std::string& name) const { return dir_.path() / name; }
  TempDir dir_;
};

TEST_F(OutputGuardTest, AcceptsNewFilesAndDevicesNamedOnPurpose) {
  OutputGuard guard;
  write_bytes(at("in.npy"), "x");
  guard.add_input("--data", at("in.npy"));
  guard.add_output("--save", at("w.safetensors"));
  guard.add_output("--trace", "/dev/null");
  guard.add_output_dir("--checkpoint-dir", at("ck/new"), [](std::string_view) { return true; });
  EXPECT_NO_THROW(guard.check());
}

TEST_F(OutputGuardTest, AnOutputIsNeverAnInputByAnySpelling) {
  write_bytes(at("t.jsonl"), "x");
  fs::create_directory(at("sub"));
  fs::create_hard_link(at("t.jsonl"), at("link.json"));
  for (const fs::path& out : {at("t.jsonl"), at("sub/../t.jsonl"), at("link.json")}) {
    OutputGuard guard;
    guard.add_input("IN", at("t.jsonl"));
    guard.add_output("OUT", out);
    EXPECT_EQ(what_of([&] { guard.check(); }), "OUT " + out.string() + " is the same file as the input IN " +
                                                   at("t.jsonl").string() + ": it would be overwritten");
  }
}

// `train --save ./s.x --trace s.x`, a new file: the trace went, the weights stayed (relative
// spellings of a file that does not exist yet were compared as written). Absolute against relative too.
TEST_F(OutputGuardTest, TwoOutputsAreTheSameNewFileByAnySpelling) {
  const fs::path cwd = fs::current_path();
  fs::current_path(dir_.path());
  fs::create_directory("sub");
  for (const auto& [a, b] : {std::pair<fs::path, fs::path>{"./s.x", "s.x"},
                             {dir_.path() / "s.x", "s.x"},
                             {"sub/../s.x", "./s.x"}}) {
    OutputGuard guard;
    guard.add_output("--save", a);
    guard.add_output("--trace", b);
    EXPECT_EQ(what_of([&] { guard.check(); }), "--trace " + b.string() + " is the same file as --save " +
                                                   a.string() + ": give them different names")
        << a << " " << b;
  }
  OutputGuard apart;
  apart.add_output("--save", "s.x");
  apart.add_output("--trace", "sub/s.x");
  EXPECT_NO_THROW(apart.check());
  fs::current_path(cwd);
}

// `trace merge mpx mpx/rank-2.jsonl` made the directory unreadable.
TEST_F(OutputGuardTest, AnOutputIsNeverAFileAnInputDirectoryReads) {
  fs::create_directory(at("mpx"));
  OutputGuard guard;
  guard.add_input_dir("DIR", at("mpx"), [](std::string_view name) { return name.starts_with("rank-"); });
  guard.add_output("OUT", at("mpx/rank-2.jsonl"));
  EXPECT_EQ(what_of([&] { guard.check(); }), "OUT " + at("mpx/rank-2.jsonl").string() +
                                                 " is one of the files the input DIR " + at("mpx").string() +
                                                 " holds: it would be overwritten");
  OutputGuard beside;
  beside.add_input_dir("DIR", at("mpx"), [](std::string_view name) { return name.starts_with("rank-"); });
  beside.add_output("OUT", at("mpx/merged.jsonl"));
  EXPECT_NO_THROW(beside.check());
}

// `--save ck/checkpoint-00000002.safetensors --checkpoint-dir ck` let the weights replace a checkpoint.
TEST_F(OutputGuardTest, AnOutputIsNeverANameAnOutputDirectoryWrites) {
  fs::create_directory(at("ck"));
  const auto checkpoints = [](std::string_view name) { return name.starts_with("checkpoint-"); };
  OutputGuard guard;
  guard.add_output("--trace", at("ck/checkpoint-00000001.safetensors"));
  guard.add_output_dir("--checkpoint-dir", at("ck"), checkpoints);
  EXPECT_EQ(what_of([&] { guard.check(); }),
            "--trace " + at("ck/checkpoint-00000001.safetensors").string() + " is a name --checkpoint-dir " +
                at("ck").string() +
                " writes its own files under (and deletes old ones): choose another name");
  OutputGuard input;
  input.add_input("--init", at("ck/checkpoint-00000002.safetensors"));
  input.add_output_dir("--checkpoint-dir", at("ck"), checkpoints);
  EXPECT_NE(what_of([&] { input.check(); }).find("writes and deletes"), std::string::npos);
}

TEST_F(OutputGuardTest, TwoOutputsAreNeverOneFile) {
  OutputGuard guard;
  guard.add_output("--save", at("w.safetensors"));
  guard.add_output("--trace", at("./w.safetensors"));
  EXPECT_EQ(what_of([&] { guard.check(); }),
            "--trace " + at("./w.safetensors").string() + " is the same file as --save " +
                at("w.safetensors").string() + ": give them different names");
}

TEST_F(OutputGuardTest, RefusesWhatIsNotARegularFile) {
  ASSERT_EQ(::mkfifo(at("pipe").c_str(), 0600), 0);
  fs::create_directory(at("sub"));
  const auto refusal = [&](const fs::path& out) {
    OutputGuard guard;
    guard.add_output("--screenshot", out);
    return what_of([&] { guard.check(); });
  };
  EXPECT_EQ(refusal(at("pipe")),
            "--screenshot " + at("pipe").string() +
                ": is a FIFO (named pipe), not a regular file; refusing to write over it");
  EXPECT_EQ(refusal(at("sub")), "--screenshot " + at("sub").string() + " is a directory; give a file name");
  EXPECT_EQ(refusal(at("missing/x.png")), "--screenshot " + at("missing/x.png").string() +
                                              ": cannot write there: directory '" + at("missing").string() +
                                              "' does not exist");
  EXPECT_EQ(refusal(""), "--screenshot '': not a file name; give the file to write");
}

TEST_F(OutputGuardTest, AnOutputDirectoryMayNotBeAFile) {
  write_bytes(at("file"), "x");
  OutputGuard guard;
  guard.add_output_dir("--checkpoint-dir", at("file/ck"), [](std::string_view) { return true; });
  EXPECT_EQ(what_of([&] { guard.check(); }), "--checkpoint-dir " + at("file/ck").string() + ": '" +
                                                 at("file").string() + "' is a file, not a directory");
}

}  // namespace
}  // namespace dpscope
